"""``ablate data prepare SPEC``: build (or reuse) a study's tokenizer and packed corpus ahead of
``ablate run``, check its tasks' data, and show what they contain."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from electra_ablate.commands.spec import SET_HELP
from electra_ablate.infra.tables import print_table


def register(app: typer.Typer) -> None:
    data_app = typer.Typer(help="Prepare and inspect a study's data.")
    app.add_typer(data_app, name="data")

    @data_app.command("prepare")
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
        import numpy as np

        from electra_ablate.data.pretraining import prepare_pretraining
        from electra_ablate.evaluation.finetune import supported_max_len
        from electra_ablate.evaluation.finetuned import FinetunedTask
        from electra_ablate.evaluation.task import family_of, get_task
        from electra_ablate.infra.progress import status_line
        from electra_ablate.study.spec import load_spec, parse_set_options, task_settings

        study = load_spec(spec, parse_set_options(set_), check_data=True)
        if bundle is not None:
            from electra_ablate.study.bundle import check_bundle_target

            check_bundle_target(bundle)
        progress = sys.stderr.isatty()
        max_seq_len = study.backbone_config().max_seq_len
        # on a terminal prepare_pretraining shows its own steps; on a pipe, plain lines say them
        with status_line("preparing the pre-training data", "off" if progress else "plain"):
            data = prepare_pretraining(
                study.data, max_seq_len, spec_dir=study.spec_dir, progress=progress
            )
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

        tasks = []
        backbone = study.backbone_config(vocab_size=data.vocab_size)
        for block in study.evaluation_blocks():
            for name in block.tasks:
                task, settings = get_task(name), task_settings(study, block, name)
                family_of(task).check(task, settings)
                if not isinstance(task, FinetunedTask):
                    tasks.append((name, task.family, "", "", "", task.headline))
                    continue
                max_len = supported_max_len(settings.recipe, backbone)
                encoded = task.encode(settings, data.tokenizer_dir, max_len)
                tasks.append(
                    (
                        name,
                        task.family,
                        f"{len(encoded.train['label']):,}",
                        f"{len(encoded.validation['label']):,}",
                        f"{np.mean(encoded.train['length']):.1f}",
                        task.headline,
                    )
                )
        corpus_headers = ("pre-training data", "train", "held-out")
        print_table(corpus_headers, corpus, title=f"seq {max_seq_len}")
        headers = ("task", "family", "train rows", "validation rows", "mean tokens", "metric")
        print_table(headers, tasks)
        typer.echo(f"data fingerprint {summary['fingerprint']} (in every run id of this data)")
        if bundle is not None:
            from electra_ablate.study.bundle import bundle_size, write_bundle

            manifest = write_bundle(study, bundle)
            size = bundle_size(bundle) / 2**20
            typer.echo(
                f"data bundle {bundle}: {len(manifest['data'])} data setting(s), "
                f"{len(manifest['tasks'])} task(s), {size:.1f} MB; on a node without the raw "
                f"data: ABLATE_CACHE={bundle} ablate run {spec} (or --data-bundle {bundle})"
            )
