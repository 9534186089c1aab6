"""Linear probes on frozen features: what a kept encoder's states make linearly readable.

A probe is a standardised linear model (logistic regression for classes, ridge regression for
scores) fitted on a training split and applied to a held-out one. Its regularisation is picked
from a small fixed grid on a seeded validation fold of the training split, by a task-agnostic
loss (log-loss, or squared error), then the probe is refitted on the whole training split: the
same procedure for every checkpoint, so a difference between checkpoints is a difference in
their features, not in hand-tuning. Everything is deterministic for a seed (Newton's method
and the closed-form ridge solve have no randomness; the seed only draws the validation fold).

The problems are scikit-learn's (``StandardScaler``, then ``LogisticRegression`` or ``Ridge`` at
the same C or alpha), solved in torch in float64, on the device the features are on (a CUDA
tensor is fitted on its GPU, numpy arrays on the CPU), on torch's own threads:

- standardising: the fitting rows' mean and population standard deviation; a column whose
  variance is zero to within rounding (scikit-learn's test) is scaled by 1;
- logistic: ``C * sum(log-loss) + ||W||^2 / 2``, the intercepts unpenalised (two classes: one
  weight vector, the logit of the larger class id; more: the softmax over K weight vectors), by
  Newton's method: a Cholesky solve of the penalised Hessian, a backtracking line search, each
  strength of the grid started from the previous one's solution, the refit from the chosen
  strength's;
- ridge: the closed form ``(X'X + alpha I) w = X'(y - mean y)``, one X'X for the whole grid.

Cost. A Newton step is a few float64 matrix products over the rows, the Hessian X'SX (rows x
features^2 multiply-adds per pair of classes) the big one, and a Cholesky solve of a
(features + 1)-square matrix: work a GPU is built for. On one CPU core it costs about what
scikit-learn's newton-cholesky cost when that did not give up (``bench/probe_fit.py``, seeded
LayerNorm-like features, one thread: a 56,000 x 256 detection probe 4.0-4.3 s against
3.6-3.9 s, the ridge grid 4-7 times faster). Float64 is what keeps Newton applicable:
scikit-learn solved in the features' float32, where the LayerNorm constraint (see
``LOGISTIC_C_GRID``) can leave the penalised Hessian too ill-conditioned for its Cholesky solve,
and it then handed over to lbfgs (60-370 iterations on CoLA's pooled features). Warm starts
leave two or three Newton steps per strength. On the 2 shared cores of this project's machine
one torch thread is the caller's best choice (``threads.torch_threads(1)``): a 600-row fit took
1.9 s on two contended threads, 0.04 s on one.

The probes return predictions; scoring them by a task's metric is the task's business. The one
exception is replaced-token detection, whose metric (ROC-AUC over the scored positions) is
returned here so every caller computes it the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from electra_ablate.pretraining.components.losses import roc_auc

LOGISTIC_C_GRID: tuple[float, ...] = (1e-4, 1e-3, 1e-2, 1e-1, 1.0)
"""Inverse L2 strengths tried for logistic probes, strongest first. Features are standardised,
so one grid suits every encoder width. Nothing weaker than 1: LayerNorm outputs satisfy an exact
linear constraint (zero mean over the hidden units before the affine part), so only the penalty
keeps the problem well conditioned. On ``tiny`` encoders of the objectives study the validation
fold picked 0.001-0.01 for CoLA, MRPC, RTE and detection, 1 for SST-2's 67k examples."""

RIDGE_ALPHA_GRID: tuple[float, ...] = (1.0, 10.0, 100.0, 1e3, 1e4)
"""L2 strengths tried for ridge probes (on standardised features), strongest last. On STS-B's
5,749 examples the validation fold picked 1 (random ``tiny`` weights), 100 (ELECTRA 15% at half
the objectives budget) and 10,000 (BERT at the full budget): with little linear signal, heavier
shrinkage wins on squared error, and the predictions tend to the X'y direction, which still
ranks (a correlation metric is blind to their scale)."""

VALIDATION_FRACTION = 0.2
"""Share of the training split (of its groups, when given) held out to pick the strength."""

MAX_ITER = 1000
"""Newton steps allowed per logistic fit (two to five is the rule)."""

TOL = 1e-4
"""Convergence: the largest absolute entry of the gradient of ``C * sum(log-loss) +
||W||^2 / 2``. The penalty's curvature there is 1, so the tolerance bounds how far the
coefficients are from the optimum alike at every strength and size. scikit-learn puts its
``tol`` (also 1e-4) on that objective divided by ``C * rows``, up to 45,000 times looser at C = 1
on a detection probe: loose enough that a fit warm-started from the previous strength would stop
at once. Newton's quadratic convergence makes the tighter bound cost a step at most."""

_DTYPE = torch.float64
_EPS = float(torch.finfo(_DTYPE).eps)


@dataclass(frozen=True)
class ProbeFit:
    """A probe's output on the held-out split and how its strength was chosen.

    ``predictions``: class ids (logistic) or values (ridge). ``scores``: the decision function,
    [n] for two classes (the logit of the larger class id), [n, classes] for more, the values
    themselves for ridge. ``validation_loss``: each tried strength's loss on the validation fold.
    """

    predictions: np.ndarray
    scores: np.ndarray
    strength: float
    validation_loss: dict[float, float] = field(default_factory=dict)


def validation_fold(n_rows: int, groups: np.ndarray | None = None, seed: int = 0) -> np.ndarray:
    """[n_rows] bool, True for the seeded validation fold.

    With ``groups`` (e.g. the sequence each token came from), whole groups go to one side, so
    no validation token shares its sentence with a fitting token.
    """
    rng = np.random.default_rng(seed)
    if groups is None:
        groups = np.arange(n_rows)
    unique = np.unique(groups)
    n_val = min(max(1, round(len(unique) * VALIDATION_FRACTION)), len(unique) - 1)
    return np.isin(groups, rng.permutation(unique)[:n_val])


def _as_numpy(x: np.ndarray | torch.Tensor) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def _device_of(x: np.ndarray | torch.Tensor) -> torch.device:
    """Where a probe on ``x`` is fitted: a tensor's own device, the CPU for anything else."""
    return x.device if isinstance(x, torch.Tensor) else torch.device("cpu")


def _on(x: np.ndarray | torch.Tensor, device: torch.device) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x.detach().to(device)
    array = np.asarray(x)
    if not array.flags.writeable:  # read-only (Arrow-backed): torch shares only writable memory
        array = array.copy()
    return torch.from_numpy(array).to(device)


@dataclass(frozen=True)
class _Scaler:
    """``StandardScaler`` fitted on some rows: their mean and population standard deviation, 1 in
    place of the deviation of a column whose variance is within its rounding error of zero
    (scikit-learn's ``_is_constant_feature``: ``var <= n eps var + (n mean eps)^2``)."""

    mean: torch.Tensor
    scale: torch.Tensor

    @classmethod
    def fit(cls, x: torch.Tensor) -> _Scaler:
        var, mean = torch.var_mean(x, dim=0, correction=0)
        n = x.shape[0]
        constant = var <= n * _EPS * var + (n * mean * _EPS) ** 2
        return cls(mean, torch.where(constant, torch.ones_like(var), var.sqrt()))

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return (x.to(_DTYPE) - self.mean) / self.scale


def _spd_solve(matrix: torch.Tensor, rhs: torch.Tensor) -> torch.Tensor:
    """``matrix^-1 rhs`` for a symmetric positive definite ``matrix``, by Cholesky; a tiny jitter
    on the diagonal, grown tenfold per failure, only where rounding made it fail."""
    jitter = 0.0
    scale = float(matrix.diagonal().abs().max().clamp(min=1.0))
    eye = torch.eye(len(matrix), dtype=matrix.dtype, device=matrix.device)
    for _ in range(12):
        factor, info = torch.linalg.cholesky_ex(matrix + jitter * eye if jitter else matrix)
        if int(info) == 0:
            return torch.cholesky_solve(rhs.unsqueeze(-1), factor).squeeze(-1)
        jitter = scale * 1e-12 if jitter == 0.0 else jitter * 10.0
    raise torch.linalg.LinAlgError("the penalised Hessian is not positive definite")


# ------------------------------------------------------------------------------ logistic
@dataclass(frozen=True)
class _Logistic:
    """``C * sum(log-loss) + ||W||^2 / 2`` on standardised rows ``x`` [n, d], the intercepts
    unpenalised: with two classes ``coef`` is [d + 1] (weights, intercept) and ``targets`` the
    0/1 labels of the larger class id, with K > 2 it is [K, d + 1] (all K classes' weights and
    intercepts, softmax over them) and ``targets`` the one-hot labels [n, K]."""

    x: torch.Tensor
    targets: torch.Tensor
    c: float

    @property
    def free(self) -> torch.Tensor | slice:
        """The coefficients Newton's step moves (flattened). The softmax is blind to a common
        shift of all K intercepts, an unpenalised direction where the Hessian is singular: the
        last class's intercept stays where it is (scikit-learn's newton-cholesky's choice), and
        ``solve`` centres the intercepts afterwards."""
        if self.targets.dim() == 1:
            return slice(None)
        n_classes, width = self.targets.shape[1], self.x.shape[1] + 1
        keep = torch.ones(n_classes * width, dtype=torch.bool, device=self.x.device)
        keep[-1] = False
        return keep

    def raw(self, coef: torch.Tensor) -> torch.Tensor:
        """The decision function, linear in ``coef`` (so ``raw(a + t b) = raw(a) + t raw(b)``)."""
        return _decision(self.x, coef)

    def loss(self, z: torch.Tensor, coef: torch.Tensor) -> float:
        if z.dim() == 1:
            pointwise = torch.nn.functional.softplus(z) - self.targets * z
        else:
            pointwise = torch.logsumexp(z, dim=1) - (self.targets * z).sum(1)
        return float(self.c * pointwise.sum() + 0.5 * coef[..., :-1].square().sum())

    def gradient(self, z: torch.Tensor, coef: torch.Tensor) -> torch.Tensor:
        p = torch.sigmoid(z) if z.dim() == 1 else torch.softmax(z, dim=1)
        residual = self.c * (p - self.targets)  # [n] or [n, K]
        weights = (residual @ self.x if z.dim() == 1 else residual.T @ self.x) + coef[..., :-1]
        return torch.cat([weights, residual.sum(0).unsqueeze(-1)], dim=-1)

    def hessian(self, z: torch.Tensor) -> torch.Tensor:
        """[m, m] over the flattened ``coef``: ``C X'SX`` per pair of classes (S the softmax's
        curvature, p_k (1[k = l] - p_l)), plus the identity on the weights."""
        d = self.x.shape[1]
        if z.dim() == 1:
            p = torch.sigmoid(z)
            curvature = {(0, 0): p * (1.0 - p)}
        else:
            p = torch.softmax(z, dim=1)
            n_classes = p.shape[1]
            curvature = {
                (k, m): p[:, k] * (float(k == m) - p[:, m])
                for k in range(n_classes)
                for m in range(k, n_classes)
            }
        n_blocks = 1 if z.dim() == 1 else p.shape[1]
        hessian = torch.zeros((n_blocks * (d + 1),) * 2, dtype=_DTYPE, device=self.x.device)
        for (k, m), weight in curvature.items():
            weight = self.c * weight
            weighted = self.x * weight.unsqueeze(1)
            block = hessian[k * (d + 1) : (k + 1) * (d + 1), m * (d + 1) : (m + 1) * (d + 1)]
            block[:d, :d] = self.x.T @ weighted
            block[:d, d] = block[d, :d] = weighted.sum(0)
            block[d, d] = weight.sum()
            if k != m:
                hessian[m * (d + 1) : (m + 1) * (d + 1), k * (d + 1) : (k + 1) * (d + 1)] = block.T
        on_weights = torch.ones(n_blocks * (d + 1), dtype=_DTYPE, device=self.x.device)
        on_weights[d :: d + 1] = 0.0  # the intercepts: no penalty
        hessian.diagonal().add_(on_weights)
        return hessian

    def solve(self, coef: torch.Tensor) -> torch.Tensor:
        """The minimiser, by Newton's method from ``coef``: Cholesky solves of the penalised
        Hessian, scikit-learn's newton-cholesky line search (Armijo, halving the step up to 20
        times), until the gradient's largest entry is within ``TOL``. Where no step lowers the
        loss beyond rounding, the current point is as good as float64 can tell: it stops
        there."""
        free = self.free
        z = self.raw(coef)
        loss = self.loss(z, coef)
        for _ in range(MAX_ITER):
            gradient = self.gradient(z, coef)
            if float(gradient.abs().max()) <= TOL:
                break
            flat = gradient.reshape(-1)
            step = torch.zeros_like(flat)
            step[free] = _spd_solve(self.hessian(z)[free][:, free], -flat[free])
            slope = float(flat @ step)
            step = step.reshape(coef.shape)
            dz = self.raw(step)
            t, at_rounding = 1.0, False
            for _ in range(21):
                trial = self.loss(z + t * dz, coef + t * step)
                if trial - loss <= t * slope / 2**11:
                    break
                if abs(trial - loss) <= 16 * _EPS * abs(loss):
                    at_rounding = True  # float64 tells the losses apart no more: the optimum
                    break
                t /= 2
            else:
                break  # no step along Newton's direction lowers the loss: nothing left to gain
            coef, z, loss = coef + t * step, z + t * dz, trial
            if at_rounding:
                break
        if coef.dim() == 2:  # scikit-learn's symmetric intercepts (lbfgs from zeros keeps them)
            coef = torch.cat([coef[:, :-1], (coef[:, -1] - coef[:, -1].mean()).unsqueeze(1)], 1)
        return coef


def _decision(x: torch.Tensor, coef: torch.Tensor) -> torch.Tensor:
    """Scores of standardised rows: [n] for a [d + 1] ``coef``, [n, K] for a [K, d + 1] one."""
    if coef.dim() == 1:
        return x @ coef[:-1] + coef[-1]
    return x @ coef[:, :-1].T + coef[:, -1]


def _log_loss(scores: torch.Tensor, y: torch.Tensor, clip: float) -> float:
    """scikit-learn's ``log_loss`` of the probabilities the scores give (the sigmoid, or the
    softmax), each clipped to [clip, 1 - clip] first, as ``log_loss`` clips at its input's
    epsilon (the features' float type's, which the probabilities had under scikit-learn)."""
    if scores.dim() == 1:
        p_true = torch.where(y == 1, torch.sigmoid(scores), torch.sigmoid(-scores))
    else:
        p_true = torch.softmax(scores, dim=1).gather(1, y.unsqueeze(1)).squeeze(1)
    return float(-p_true.clamp(clip, 1.0 - clip).log().mean())


def _clip_of(x: torch.Tensor) -> float:
    """The epsilon ``log_loss`` clipped at: scikit-learn kept float32 features in float32 and
    turned anything else into float64."""
    return float(torch.finfo(torch.float32).eps) if x.dtype == torch.float32 else _EPS


def logistic_probe(
    train_x: np.ndarray | torch.Tensor,
    train_y: np.ndarray | torch.Tensor,
    test_x: np.ndarray | torch.Tensor,
    *,
    groups: np.ndarray | None = None,
    seed: int = 0,
    grid: tuple[float, ...] = LOGISTIC_C_GRID,
) -> ProbeFit:
    """Standardise, fit L2 logistic regression at the strength with the lowest validation
    log-loss (ties: the stronger penalty), refit on all of ``train_x``, predict ``test_x``."""
    device = _device_of(train_x)
    x, test = _on(train_x, device), _on(test_x, device)
    labels = _on(_as_numpy(train_y).astype(np.int64), device)
    classes, y = torch.unique(labels, sorted=True, return_inverse=True)
    if len(classes) < 2:
        raise ValueError("a logistic probe needs at least two classes in its training split")
    val = _on(validation_fold(len(x), groups, seed), device)
    if len(torch.unique(y[~val])) < len(classes):
        raise ValueError("a logistic probe's fitting fold must hold every class of its split")
    n_classes, clip = len(classes), _clip_of(x)
    width = (x.shape[1] + 1,) if n_classes == 2 else (n_classes, x.shape[1] + 1)
    coef = torch.zeros(width, dtype=_DTYPE, device=device)
    targets = y.to(_DTYPE) if n_classes == 2 else torch.nn.functional.one_hot(y).to(_DTYPE)

    features = x.to(_DTYPE)
    fitting = features[~val]
    scaler = _Scaler.fit(fitting)
    fitting, held_out = scaler(fitting), scaler(features[val])
    losses: dict[float, float] = {}
    solutions: dict[float, torch.Tensor] = {}
    for c in grid:  # strongest first: each fit starts from the previous one's optimum
        coef = solutions[c] = _Logistic(fitting, targets[~val], c).solve(coef)
        losses[c] = _log_loss(_decision(held_out, coef), y[val], clip)
    best = min(grid, key=lambda c: (losses[c], c))
    del fitting, held_out

    scaler = _Scaler.fit(features)
    coef = _Logistic(scaler(features), targets, best).solve(solutions[best])
    scores = _decision(scaler(test), coef)
    chosen = (scores > 0).long() if scores.dim() == 1 else scores.argmax(dim=1)
    return ProbeFit(_as_numpy(classes[chosen]), _as_numpy(scores), best, losses)


# --------------------------------------------------------------------------------- ridge
def _ridge_fits(
    x: torch.Tensor, y: torch.Tensor, alphas: tuple[float, ...]
) -> dict[float, torch.Tensor]:
    """[d + 1] (weights, intercept) of ridge regression on standardised rows ``x`` for each
    ``alpha``: ``(X'X + alpha I) w = X'(y - mean y)``, the intercept from the means, as
    ``Ridge(fit_intercept=True)`` solves it; X'X, the costly product, is formed once."""
    gram = x.T @ x
    y_mean = y.mean()
    rhs = x.T @ (y - y_mean)
    x_mean = x.mean(0)  # zero up to rounding: the rows are standardised with their own mean
    eye = torch.eye(len(gram), dtype=_DTYPE, device=x.device)
    fits = {}
    for alpha in alphas:
        w = _spd_solve(gram + alpha * eye, rhs)
        fits[alpha] = torch.cat([w, (y_mean - x_mean @ w).reshape(1)])
    return fits


def ridge_probe(
    train_x: np.ndarray | torch.Tensor,
    train_y: np.ndarray | torch.Tensor,
    test_x: np.ndarray | torch.Tensor,
    *,
    groups: np.ndarray | None = None,
    seed: int = 0,
    grid: tuple[float, ...] = RIDGE_ALPHA_GRID,
) -> ProbeFit:
    """Standardise, fit ridge regression at the strength with the lowest validation squared
    error (ties: the stronger penalty), refit on all of ``train_x``, predict ``test_x``."""
    device = _device_of(train_x)
    features, test = _on(train_x, device).to(_DTYPE), _on(test_x, device)
    y = _on(_as_numpy(train_y).astype(np.float64), device)
    val = _on(validation_fold(len(features), groups, seed), device)
    fitting = features[~val]
    scaler = _Scaler.fit(fitting)
    fits = _ridge_fits(scaler(fitting), y[~val], grid)
    del fitting
    held_out = scaler(features[val])
    losses = {a: float((_decision(held_out, fits[a]) - y[val]).square().mean()) for a in grid}
    best = min(grid, key=lambda a: (losses[a], -a))
    scaler = _Scaler.fit(features)
    coef = _ridge_fits(scaler(features), y, (best,))[best]
    predictions = _as_numpy(_decision(scaler(test), coef))
    return ProbeFit(predictions, predictions, best, losses)


def detection_probe(
    train_x: np.ndarray | torch.Tensor,
    train_replaced: np.ndarray | torch.Tensor,
    test_x: np.ndarray | torch.Tensor,
    test_replaced: np.ndarray | torch.Tensor,
    *,
    groups: np.ndarray | None = None,
    seed: int = 0,
) -> tuple[float, ProbeFit]:
    """Replaced-token detection from frozen token features: a logistic probe fitted on the
    training split's tokens (features [M, H], labels [M]), and its ROC-AUC on the test split's.

    Pass only the tokens detection is scored over (the replaceable ones,
    ``CorruptedText.replaceable``), and as ``groups`` the sequence each training token comes
    from, so the strength is validated on unseen sequences.
    """
    fit = logistic_probe(train_x, train_replaced, test_x, groups=groups, seed=seed)
    labels = torch.as_tensor(_as_numpy(test_replaced)).bool()
    scores = torch.from_numpy(np.asarray(fit.scores, dtype=np.float64))
    return float(roc_auc(scores, labels, torch.ones_like(labels))), fit
