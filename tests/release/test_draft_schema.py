"""The non-private schema draft (infer-schema without a budget): kinds, null tokens, the warning header."""

import privsyn_spark
from privsyn_spark.api import SAMPLE_DATA
from privsyn_spark.release import draft_run
from privsyn_spark.release.schema_draft import WARNING_HEADER, infer_schema
from privsyn_spark.schema import schema as declared
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


def test_the_public_schema_is_the_declared_one_with_its_draft_and_no_hook():
    assert privsyn_spark.Schema is draft_run.Schema and issubclass(draft_run.Schema, declared.Schema)
    assert not hasattr(declared.Schema, "draft") and not hasattr(declared, "DRAFTER")
    doc = {"columns": [{"name": "x", "type": "categorical", "values": ["a"]}]}
    assert privsyn_spark.Schema.from_dict(doc).names == ("x",)
