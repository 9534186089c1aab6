"""``ablate check NAME``: run the objective contract (``electra_ablate.conformance.objective``) on
a registered objective, built-in or third-party, or on ``package.module:Class``; ``ablate check
--task NAME``: the task contract (``electra_ablate.conformance.task``) on a registered task. What
a plugin author runs before naming either in a study."""

from __future__ import annotations

import json
from typing import Any

import typer


def parse_params(pairs: list[str]) -> dict[str, Any]:
    """``key=value`` pairs as a params dict. A value is read as JSON where it parses (numbers,
    ``true``/``false``, ``null``) and kept as a string otherwise, so ``tying=all`` needs no
    quotes; the objective's ``Params`` model does the rest of the typing."""
    from electra_ablate.infra.errors import InputError

    params: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise InputError(f"--param {pair!r} is not key=value")
        try:
            params[key] = json.loads(raw)
        except json.JSONDecodeError:
            params[key] = raw
    return params


def validate_user_params(name: str, params_model: Any, params: dict[str, Any]) -> None:
    """Bad ``--param`` values are the user's input to fix (exit 2), unlike params whose defaults
    do not validate, which the contract reports as the objective's fault (exit 1)."""
    from pydantic import ValidationError

    from electra_ablate.infra.errors import InputError, did_you_mean

    if not params:
        return
    try:
        params_model.model_validate(params)
    except ValidationError as exc:
        try:
            params_model()
        except ValidationError:
            return  # the defaults are broken too: the params rule says so
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"])
        hint = ""
        if first["type"] == "extra_forbidden":
            hint = did_you_mean(field, params_model.model_fields)
        raise InputError(f"objective {name!r}: --param {field}: {first['msg']}{hint}") from None
    except AttributeError:
        return  # not a pydantic model: the params rule says so


def register(app: typer.Typer) -> None:
    @app.command("check", short_help="Check that an objective or a task keeps its contract.")
    def check_command(
        name: str | None = typer.Argument(
            None,
            help="registered objective name (see `ablate objectives`), or package.module:Class",
        ),
        task: str | None = typer.Option(
            None, "--task", help="check the registered task NAME instead (see `ablate tasks`)"
        ),
        param: list[str] | None = typer.Option(
            None, "--param", "-p", help="objective param as key=value (repeatable)"
        ),
        as_json: bool = typer.Option(False, "--json", help="print the outcome as JSON"),
    ) -> None:
        """Check that objective NAME keeps the contract that the engine, the FLOPs budget,
        checkpoints, fine-tuning and export rely on (seconds, on a micro model); with --task,
        that a task keeps the evaluation contract (a GLUE task reads $ABLATE_DATA_DIR/glue).

        Prints `ok  RULE` per rule held; a broken rule: one `error: RULE: what` line, exit 1.
        """
        from electra_ablate.conformance import (
            ContractError,
            RuleOutcome,
            run_contract,
            run_task_contract,
        )
        from electra_ablate.infra.errors import InputError

        if (name is None) == (task is None):
            raise InputError("give an objective NAME, or --task NAME (not both)")
        held: list[RuleOutcome] = []

        def show(outcome: RuleOutcome) -> None:
            held.append(outcome)
            if as_json:
                return
            if outcome.skipped is None:
                typer.echo(f"ok  {outcome.rule}")
            else:
                typer.echo(f"skip  {outcome.rule}: {outcome.skipped}")

        failure: ContractError | None = None
        try:
            if task is not None:
                if param:
                    raise InputError("--param is for objectives; a task's params come from a spec")
                from electra_ablate.evaluation.task import get_task

                run_task_contract(get_task(task), on_outcome=show)
                params: dict[str, Any] = {}
            else:
                from electra_ablate.pretraining.registry import get_objective

                objective_class = get_objective(name)
                params = parse_params(param or [])
                validate_user_params(name, getattr(objective_class, "Params", None), params)
                run_contract(objective_class, params, on_outcome=show)
        except ContractError as exc:
            if not as_json:
                raise
            failure = exc
        if not as_json:
            return
        rows = [
            {
                "rule": o.rule,
                "status": "ok" if o.skipped is None else "skipped",
                "detail": o.skipped,
            }
            for o in held
        ]
        if failure is not None:
            rows.append({"rule": failure.rule, "status": "failed", "detail": failure.detail})
        subject = {"task": task} if task is not None else {"objective": name, "params": params}
        report = {**subject, "ok": failure is None, "rules": rows}
        typer.echo(json.dumps(report, indent=2))
        if failure is not None:
            raise failure
