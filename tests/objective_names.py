"""The seven built-in objectives, named once for every test that checks all of them."""

BUILT_IN = (
    "bert_mlm",
    "replace_mlm",
    "all_tokens_mlm",
    "electra_15",
    "electra",
    "two_stage",
    "adversarial",
)
