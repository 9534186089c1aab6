"""Reference numbers and findings of Clark et al., "ELECTRA" (ICLR 2020), for reports.

Only what the paper states in its text or tables (checked against arXiv 2003.10555), keyed by
this project's objective names so a report can print them beside measured values.
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

# §3.2 and Figure 3, per objective that the statement is about.
FINDINGS: dict[str, tuple[str, ...]] = {
    "electra": (
        "Weight tying with a same-size generator, 500k steps (§3.2): GLUE 83.6 with no tying, "
        "84.3 tying token embeddings, 84.4 tying all weights.",
        "Generator size (Figure 3 left, 500k steps each): generators 1/4–1/2 the size of the "
        "discriminator work best; a generator smaller than the discriminator improves results.",
    ),
    "two_stage": (
        "Two-stage training (Figure 3 right): GLUE improves notably after the switch from the "
        "generative to the discriminative objective but does not end up above joint training; "
        "without initialising D from G, D sometimes fails to learn beyond the majority class.",
    ),
    "adversarial": (
        "Adversarial training (Figure 3 right, §3.2): above BERT but below "
        "maximum-likelihood ELECTRA; the adversarial generator reaches 58% MLM accuracy against "
        "65% for an MLE-trained one and has a low-entropy output distribution.",
    ),
}
