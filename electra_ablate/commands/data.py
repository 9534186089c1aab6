"""``ablate data prepare SPEC``: build (or reuse) a study's tokenizer and packed corpus ahead of
``ablate run``, check its tasks' data, and show what they contain. The work is
``electra_ablate.study.prepare``'s; the command parses options, prints, and writes a bundle."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from electra_ablate.commands.spec import SET_HELP
from electra_ablate.infra.tables import print_table


def register(app: typer.Typer) -> None:
    data_app = typer.Typer(help="Prepare and inspect a study's data.")
    app.add_typer(data_app, name="data")

    @data_app.command("prepare", short_help="Build and cache the data a spec needs, once.")
    def prepare_command(
        spec: Path = typer.Argument(..., metavar="SPEC", help="study spec (YAML)"),
        set_: list[str] = typer.Option([], "--set", metavar="PATH=VALUE", help=SET_HELP),
        bundle: Path | None = typer.Option(
            None,
            "--bundle",
            metavar="DIR",
            help="also copy the tokenizer, packed sequences and task data into one relocatable "
            "folder, for nodes with no raw data or network (ABLATE_CACHE=DIR ablate run SPEC)",
        ),
    ) -> None:
        """Clean the corpus, train the tokenizer, pack sequences and encode the spec's
        fine-tuned tasks; everything is cached, so a later run starts at once."""
        from electra_ablate.spec import load_spec, parse_set_options
        from electra_ablate.study.prepare import prepare_study_data

        study = load_spec(spec, parse_set_options(set_), check_data=True)
        if bundle is not None:
            from electra_ablate.scaleout.bundle import check_bundle_target

            check_bundle_target(bundle)
        prepared = prepare_study_data(study, progress=sys.stderr.isatty())
        data, max_seq_len = prepared.data, prepared.max_seq_len
        summary = data.summary
        corpus = [
            (key, f"{summary[key]['train']:,}", f"{summary[key]['heldout']:,}")
            for key in ("documents", "sequences", "tokens")
        ]
        corpus += [
            ("padding", f"{summary['padding_fraction']:.1%}", ""),
            ("[UNK] rate", "", f"{summary['unk_rate_heldout']:.3%}"),
            ("vocab size", f"{data.vocab_size:,}", ""),
            ("tokenizer", str(data.tokenizer_dir), ""),
        ]
        tasks = [
            (
                t.name,
                t.family,
                f"{t.train_rows:,}" if t.train_rows is not None else "",
                f"{t.validation_rows:,}" if t.validation_rows is not None else "",
                f"{t.mean_tokens:.1f}" if t.mean_tokens is not None else "",
                t.metric,
            )
            for t in prepared.tasks
        ]
        corpus_headers = ("pre-training data", "train", "held-out")
        print_table(corpus_headers, corpus, title=f"seq {max_seq_len}")
        headers = ("task", "family", "train rows", "validation rows", "mean tokens", "metric")
        print_table(headers, tasks)
        typer.echo(f"data fingerprint {summary['fingerprint']} (in every run id of this data)")
        if bundle is not None:
            from electra_ablate.scaleout.bundle import folder_size, write_bundle

            manifest = write_bundle(study, bundle)
            size = folder_size(bundle) / 2**20
            typer.echo(
                f"data bundle {bundle}: {len(manifest['data'])} data setting(s), "
                f"{len(manifest['tasks'])} task(s), {size:.1f} MB; on a node without the raw "
                f"data: ABLATE_CACHE={bundle} ablate run {spec} (or --data-bundle {bundle})"
            )
