"""The private release: the measure stage's passes around PrivSyn's noise and selection (Algorithm 3, lines 1-5)."""
