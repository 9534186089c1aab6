"""The objective registry: objectives found and built by name or by import path.

Objectives are discovered through the ``electra_ablate.objectives`` entry-point group, the same
door a third-party package uses; a spec may also name one ``package.module:Class``
(``import_objective``). An objective is built from its name and params on a device
(``build_objective``) or on the meta device (``build_on_meta``), and its output biases may then
start at the data's priors (``init_output_biases``). The contract an objective keeps is
``electra_ablate.pretraining.objective``.
"""

from __future__ import annotations

import importlib
from collections.abc import Collection, Iterable, Mapping
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from electra_ablate.backbone.config import BackboneConfig
from electra_ablate.backbone.tokens import Vocab
from electra_ablate.infra.entry_points import look_up, registered
from electra_ablate.infra.errors import AblateError, InputError, did_you_mean
from electra_ablate.pretraining.objective import Objective

ENTRY_POINT_GROUP = "electra_ablate.objectives"


def installed_objective(name: str, known: Mapping[str, type[Objective]]) -> type[Objective] | None:
    """Objective ``name`` where it is installed here (registered, or importable as
    ``package.module:Class``), else None: reports read folders made on other machines."""
    if not is_import_path(name):
        return known.get(name)
    try:
        return import_objective(name)
    except AblateError:
        return None


def available_objectives() -> dict[str, type[Objective]]:
    """Every objective registered in the entry-point group, built-in or third-party."""
    found: dict[str, type[Objective]] = {}
    for ep in registered(ENTRY_POINT_GROUP):
        try:
            cls = ep.load()
        except Exception as exc:  # a broken plugin must not take the CLI down
            raise AblateError(
                f"objective entry point {ep.name!r} ({ep.value}) failed: {exc}"
            ) from exc
        if not (isinstance(cls, type) and issubclass(cls, Objective)):
            raise AblateError(f"objective entry point {ep.name!r} ({ep.value}) is not an Objective")
        found[ep.name] = cls
    return dict(sorted(found.items()))


def get_objective(name: str) -> type[Objective]:
    """A registered objective by its entry-point name, or ``package.module:Class`` imported
    directly (``import_objective``): a new objective is usable before any (re-)install."""
    if is_import_path(name):
        return import_objective(name)
    return look_up("objective", name, available_objectives())


def is_import_path(name: str) -> bool:
    """Whether an objective name is ``package.module:Class`` rather than a registered name
    (entry-point names cannot hold a colon)."""
    return ":" in name


def import_objective(path: str) -> type[Objective]:
    """The ``Objective`` subclass at ``package.module:Class``, under the registry's rule (an
    ``Objective`` subclass, as an entry point must be). Spec and ids record ``path`` as given,
    so the module must be importable wherever the study runs (installed, or on ``PYTHONPATH``).

    A module or class that is not there is the user's to fix (``InputError``, exit 2); a module
    that fails while importing is a fault of the plugin (``AblateError``, exit 1), as a broken
    entry point is.
    """
    module_name, _, qualname = path.partition(":")
    if not module_name or not qualname or ":" in qualname:
        raise InputError(f"objective {path!r}: give a registered name or package.module:Class")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or module_name
        if module_name == missing or module_name.startswith(missing + "."):
            raise InputError(
                f"objective {path!r}: no module named {missing!r} (install the package, or put "
                "its folder on PYTHONPATH)"
            ) from None
        raise AblateError(f"objective {path!r}: importing {module_name} failed: {exc}") from exc
    except Exception as exc:  # a broken plugin must not take the CLI down with a traceback
        raise AblateError(f"objective {path!r}: importing {module_name} failed: {exc}") from exc
    found: Any = module
    for part in qualname.split("."):
        if not hasattr(found, part):
            classes = [
                n
                for n, v in vars(module).items()
                if isinstance(v, type) and issubclass(v, Objective)
            ]
            raise InputError(
                f"objective {path!r}: module {module_name} has no {qualname!r}"
                f"{did_you_mean(qualname, classes)}"
            )
        found = getattr(found, part)
    if not (isinstance(found, type) and issubclass(found, Objective)):
        raise InputError(f"objective {path!r} is not an Objective subclass")
    return found


def declared_metric_kinds(objectives: Iterable[str]) -> dict[str, str]:
    """The ``metric_kinds`` that the named objectives declare, where they are installed."""
    try:
        known = available_objectives()
    except AblateError:
        return {}
    declared: dict[str, str] = {}
    for name in objectives:
        found = installed_objective(name, known)
        if found is not None:
            declared |= dict(found.metric_kinds)
    return declared


@torch.no_grad()
def init_output_biases(objective: Objective, kinds: Collection[str]) -> list[str]:
    """Start the output biases of the given kinds at their priors; returns the kinds it set.

    The original ELECTRA code starts every bias at zero, and an untrained generator then samples
    almost uniformly: the start of the curriculum the paper's joint training relies on. Priors
    (log token frequencies, the base rate of replaced tokens) are a deviation, offered because
    a post-LN encoder otherwise first fits those base rates with shared state directions.
    """
    done = []
    for prior in objective.output_priors():
        if prior.kind in kinds:
            if isinstance(prior.value, torch.Tensor):
                prior.bias.copy_(prior.value)
            else:
                prior.bias.fill_(prior.value)
            done.append(prior.kind)
    return sorted(set(done))


def build_objective(
    name: str, backbone: BackboneConfig, params: dict[str, Any] | None, vocab: Vocab
) -> Objective:
    cls = get_objective(name)
    return cls(backbone, cls.Params.model_validate(params or {}), vocab)


class _NoFillOnMeta(TorchFunctionMode):
    """Random initialisation of a meta tensor returns it as it is: it has no values to fill.
    torch would route the fill through its decompositions, whose first use imports the
    compiler stack (about a second of every ``ablate run`` that plans on the meta device)."""

    FILLS = frozenset({"normal_", "uniform_", "trunc_normal_"})  # methods and nn.init's

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        tensor = args[0] if args else kwargs.get("tensor")  # nn.init passes it by name
        if getattr(func, "__name__", "") in self.FILLS and getattr(tensor, "is_meta", False):
            return tensor
        return func(*args, **kwargs)


def build_on_meta(
    name: str, backbone: BackboneConfig, params: dict[str, Any] | None, vocab: Vocab
) -> Objective:
    """The objective on the meta device: its shapes, parameter counts and FLOPs plan without
    memory or initialisation (planning, estimates and ``ablate flops`` need nothing more)."""
    with torch.device("meta"), _NoFillOnMeta():
        return build_objective(name, backbone, params, vocab)
