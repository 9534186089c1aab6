"""The GLUE scores the ELECTRA paper publishes for the objectives this toolkit runs (Table 5).

The GLUE family prints them beside measured scores (``TaskFamily.published``) and the paper's
claims (``electra_ablate.analysis.paper``) rank them; they are GLUE facts, so they live with the
GLUE family and the claims import them from here. Keyed by this project's objective names.
"""

from __future__ import annotations

PAPER = (
    'Clark et al., "ELECTRA: Pre-training Text Encoders as Discriminators Rather Than '
    'Generators", ICLR 2020'
)

TABLE5_SOURCE = (
    f"{PAPER}, Table 5 (§3.5, compute-efficiency experiments): GLUE dev score, median of 10 "
    "fine-tuning runs; base-size models (the §3.2 default; its BERT row equals BERT-Base's 82.2 "
    "in Table 1)"
)

# Table 5, in the paper's column order (which is also its ranking).
TABLE5_GLUE: dict[str, float] = {
    "electra": 85.0,
    "all_tokens_mlm": 84.3,
    "replace_mlm": 82.4,
    "electra_15": 82.4,
    "bert_mlm": 82.2,
}

TABLE5_NAMES: dict[str, str] = {
    "electra": "ELECTRA",
    "all_tokens_mlm": "All-Tokens MLM",
    "replace_mlm": "Replace MLM",
    "electra_15": "ELECTRA 15%",
    "bert_mlm": "BERT",
}
