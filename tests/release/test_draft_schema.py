"""The non-private schema draft (infer-schema without a budget): kinds, null tokens, the warning header."""

from privsyn_spark.api import SAMPLE_DATA
from privsyn_spark.release.schema_draft import WARNING_HEADER, infer_schema
from privsyn_spark.schema.schema import save_schema


def test_infer_schema_drafts_and_warns(spark, tmp_path):
    df = spark.read.csv(SAMPLE_DATA, header=True, inferSchema=True)
    draft = infer_schema(df, null_tokens=("?",), max_categories=50)
    kinds = {c.name: c.kind for c in draft.columns}
    assert kinds["age"] == "numerical" and kinds["workclass"] == "categorical"
    assert "?" not in draft.column("workclass").values
    path = tmp_path / "draft.yaml"
    save_schema(draft, path, header=WARNING_HEADER)
    assert "NOT private" in path.read_text()
