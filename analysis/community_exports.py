"""Exports the community reuses: a Hugging Face ``datasets`` folder (Parquet split and dataset card) and
Croissant 1.0 JSON-LD metadata, both built from the comparison table and its export manifest. No Django.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from analysis.exports import ExportManifest, export_comparisons, sha256_file

CROISSANT_CONTEXT: Mapping[str, Any] = {
    "@language": "en",
    "@vocab": "https://schema.org/",
    "citeAs": "cr:citeAs",
    "column": "cr:column",
    "conformsTo": "dct:conformsTo",
    "cr": "http://mlcommons.org/croissant/",
    "rai": "http://mlcommons.org/croissant/RAI/",
    "data": {"@id": "cr:data", "@type": "@json"},
    "dataType": {"@id": "cr:dataType", "@type": "@vocab"},
    "dct": "http://purl.org/dc/terms/",
    "examples": {"@id": "cr:examples", "@type": "@json"},
    "extract": "cr:extract",
    "field": "cr:field",
    "fileProperty": "cr:fileProperty",
    "fileObject": "cr:fileObject",
    "fileSet": "cr:fileSet",
    "format": "cr:format",
    "includes": "cr:includes",
    "isLiveDataset": "cr:isLiveDataset",
    "jsonPath": "cr:jsonPath",
    "key": "cr:key",
    "md5": "cr:md5",
    "parentField": "cr:parentField",
    "path": "cr:path",
    "recordSet": "cr:recordSet",
    "references": "cr:references",
    "regex": "cr:regex",
    "repeated": "cr:repeated",
    "replace": "cr:replace",
    "sc": "https://schema.org/",
    "separator": "cr:separator",
    "source": "cr:source",
    "subField": "cr:subField",
    "transform": "cr:transform",
}
"""The Croissant 1.0 specification's JSON-LD context (mlcommons.org/croissant/1.0)."""
CROISSANT_CONFORMS_TO = "http://mlcommons.org/croissant/1.0"
LICENSE_PLACEHOLDER = "other"
"""The card's licence until the study's owner sets one: participants' data is released under the study's terms."""
SPLIT = "train"


def _hf_dtype(dtype: pa.DataType) -> str:
    """The ``datasets`` Value dtype of an Arrow type."""
    if pa.types.is_boolean(dtype):
        return "bool"
    if pa.types.is_integer(dtype):
        return "int64"
    if pa.types.is_floating(dtype):
        return "float64"
    if pa.types.is_timestamp(dtype):
        return "timestamp[us, tz=UTC]"
    return "string"


def _croissant_type(dtype: pa.DataType) -> str:
    if pa.types.is_boolean(dtype):
        return "sc:Boolean"
    if pa.types.is_integer(dtype):
        return "sc:Integer"
    if pa.types.is_floating(dtype):
        return "sc:Float"
    if pa.types.is_timestamp(dtype):
        return "sc:Date"
    return "sc:Text"


def _schema(path: Path) -> pa.Schema:
    return pq.read_schema(path)


def _card(name: str, schema: pa.Schema, manifest: ExportManifest, citation: str) -> str:
    features = "\n".join(f"  - name: {json.dumps(f.name)}\n    dtype: {_hf_dtype(f.type)}" for f in schema)
    return f"""---
pretty_name: {json.dumps(name)}
license: {LICENSE_PLACEHOLDER}
task_categories:
- summarization
tags:
- human-evaluation
- pairwise-comparison
configs:
- config_name: default
  data_files:
  - split: {SPLIT}
    path: data/{SPLIT}.parquet
dataset_info:
  features:
{features}
  splits:
  - name: {SPLIT}
    num_examples: {manifest.rows}
    num_bytes: {manifest.files[0].bytes if manifest.files else 0}
---

# {name}

Pairwise human judgments of summaries exported by Satisfy: one row per comparison (a match of the blind
tournament, or a pair implied by an imported judgment), with the pseudonymous `annotator` code that every
clustered statistic clusters on. The columns are described in the platform's `docs/comparison-table.md`.

- rows: {manifest.rows}; table checksum (sha256 of the canonical table): `{manifest.table_sha256}`
- design: {_design_words(manifest.design)}
- code version: `{manifest.code_version}`; created {manifest.created_at}
- participant texts included: {"yes" if manifest.includes_texts else "no"}

```python
from datasets import load_dataset
comparisons = load_dataset("parquet", data_files="data/{SPLIT}.parquet", split="{SPLIT}")
```

## Licence

**Set the licence before publishing** (`license:` above is a placeholder): the data is the study's
participants' work, released under the study's consent terms.

## Citation

```bibtex
{citation}
```
"""


DESIGN_WORDS = {
    "bracket": "single-elimination brackets (`stage` round1 ... final): per-stage win rates are the headline",
    "adaptive": "adaptive (`stage` adaptive): each pair was chosen from the judgments before it, so win rates are "
    "not comparable to a bracket's; analyse with Bradley-Terry strengths",
    "mixed": "bracket and adaptive comparisons mixed (see `stage`): analyse with Bradley-Terry strengths",
}


def _design_words(design: str | None) -> str:
    return DESIGN_WORDS.get(design or "", "none stated (no `stage` column)")


def _citation(name: str, created_at: str) -> str:
    key = "".join(c for c in name.lower() if c.isalnum())[:24] or "dataset"
    return (
        f"@misc{{{key}{created_at[:4]},\n  title = {{{name}}},\n  author = {{the study's authors, to be filled in}},\n"
        f"  year = {{{created_at[:4]}}},\n  note = {{Human evaluation exported by Satisfy}}\n}}"
    )


def croissant_metadata(
    *, name: str, description: str, parquet: Path, relative_path: str, manifest: ExportManifest, citation: str
) -> dict[str, Any]:
    """Croissant 1.0 JSON-LD for one Parquet file: the dataset, its FileObject (with sha256) and one
    RecordSet whose fields extract the file's columns, each with a schema.org data type."""
    schema = _schema(parquet)
    file_id = "comparisons-parquet"
    return {
        "@context": dict(CROISSANT_CONTEXT),
        "@type": "sc:Dataset",
        "name": name,
        "description": description,
        "conformsTo": CROISSANT_CONFORMS_TO,
        "license": LICENSE_PLACEHOLDER,
        "url": "https://example.org/set-the-dataset-url",
        "citeAs": citation,
        "version": "1.0.0",
        "datePublished": manifest.created_at[:10],
        "distribution": [
            {
                "@type": "cr:FileObject",
                "@id": file_id,
                "name": file_id,
                "contentUrl": relative_path,
                "encodingFormat": "application/x-parquet",
                "sha256": sha256_file(parquet),
            }
        ],
        "recordSet": [
            {
                "@type": "cr:RecordSet",
                "@id": "comparisons",
                "name": "comparisons",
                "description": "One row per pairwise comparison (docs/comparison-table.md).",
                "field": [
                    {
                        "@type": "cr:Field",
                        "@id": f"comparisons/{f.name}",
                        "name": f.name,
                        "dataType": _croissant_type(f.type),
                        "source": {"fileObject": {"@id": file_id}, "extract": {"column": f.name}},
                    }
                    for f in schema
                ],
            }
        ],
    }


def export_community(
    table: pd.DataFrame,
    out_dir: Path,
    *,
    study: str | None = None,
    name: str | None = None,
    exclusion: Mapping[str, Any] | None = None,
    filters: Mapping[str, Any] | None = None,
) -> ExportManifest:
    """Write ``out_dir/data/train.parquet`` (with ``comparisons.manifest.json``), the dataset card
    ``out_dir/README.md`` and ``out_dir/croissant.json``: a folder ``datasets.load_dataset`` reads."""
    data = out_dir / "data"
    data.mkdir(parents=True, exist_ok=True)
    manifest = export_comparisons(
        table, data, stem=SPLIT, formats=("parquet",), study=study, exclusion=exclusion, filters=filters
    )
    title = name or f"{study or manifest.study or 'satisfy'} comparisons"
    citation = _citation(title, manifest.created_at)
    parquet = data / f"{SPLIT}.parquet"
    (out_dir / "README.md").write_text(_card(title, _schema(parquet), manifest, citation), encoding="utf-8")
    metadata = croissant_metadata(
        name=title,
        description=f"Pairwise human judgments of summaries ({manifest.rows} comparisons), exported by Satisfy.",
        parquet=parquet,
        relative_path=f"data/{SPLIT}.parquet",
        manifest=manifest,
        citation=citation,
    )
    (out_dir / "croissant.json").write_text(json.dumps(metadata, indent=2) + "\n", encoding="utf-8")
    return manifest


__all__ = ["CROISSANT_CONTEXT", "croissant_metadata", "export_community"]
