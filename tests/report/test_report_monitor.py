"""The report's "did it learn" table carries the collapse monitor's final held-out values."""

from __future__ import annotations

import polars as pl

from electra_ablate.report.pretraining import diagnostics_section, diagnostics_table


def monitored_metrics() -> pl.DataFrame:
    """An ELECTRA-like run whose detector collapsed and a BERT-like one that did not."""
    rows = []
    for label, detector in (("bert_mlm", False), ("electra", True)):
        for step in (10, 20):
            for split in ("train", "heldout"):
                rows.append(
                    {
                        "run_id": label,
                        "objective": label,
                        "label": label,
                        "pretrain_seed": 0,
                        "step": step,
                        "split": split,
                        "flops_paper": 1e12 * step,
                        "disc_auc": 0.5 if detector else None,
                        "mlm_nats_learnt": None if detector else 0.5,
                        "enc_spread": (0.0003 if detector else 0.7)
                        * (1 if split == "heldout" else 500),
                        "disc_head_logit_spread": 0.00004 if detector else None,
                        "disc_head_inactive": 0.0 if detector else None,
                    }
                )
    return pl.DataFrame(rows)


def test_the_did_it_learn_table_shows_the_monitors_final_held_out_values():
    text = diagnostics_section(monitored_metrics(), ["bert_mlm", "electra"])
    header = next(line for line in text.splitlines() if line.startswith("| Label"))
    assert "enc_spread" in header and "disc_head_logit_spread" in header
    assert "disc_head_inactive" not in header  # in diagnostics.csv and the panels only
    electra = next(line for line in text.splitlines() if line.startswith("| electra"))
    assert "0.000 (0.150)" in electra  # held out (train, smoothed): dropout spreads training
    assert "0 means every position has the same state" in text
    assert "one answer whatever the token" in text


def test_diagnostics_csv_lists_every_monitor_signal():
    table = diagnostics_table(monitored_metrics(), ["bert_mlm", "electra"])
    for name in ("enc_spread", "disc_head_logit_spread", "disc_head_inactive"):
        assert f"{name}_heldout" in table.columns
    assert table.filter(pl.col("label") == "bert_mlm")["enc_spread_heldout"][0] == 0.7
