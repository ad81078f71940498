"""Proposers: where candidates come from. The offline proposer (default, no network) searches the op group's
parametric Triton template with Optuna TPE; its study lives in the run's SQLite database, so it resumes. Where the
space declares more templates (``rsi.spaces``, e.g. a CuTe DSL one), :func:`offline_proposer` takes turns between one
such study per template that can run here; the others are skipped with a note (:func:`runnable`), never proposed,
so they count neither as candidates nor as rejections.

Every proposer implements ``propose() -> Proposal | None`` (None: nothing left to try) and
``feedback(proposal, verdict, objective)``. Proposals are judged by the harness like any other candidate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol

from rsi.contract import Candidate
from rsi.spaces import Space, template_source


@dataclass
class Proposal:
    candidate: Candidate
    handle: Any = None                   # proposer-private (e.g. the Optuna trial number)
    meta: dict[str, Any] = field(default_factory=dict)


class Proposer(Protocol):
    name: str

    def propose(self) -> Proposal | None: ...

    def feedback(self, proposal: Proposal, verdict: dict, objective: float | None) -> None: ...


class OfflineProposer:
    """Optuna TPE over the template's declared axes, seeded with the space's analytical heuristic."""

    name = "offline"

    def __init__(self, space: Space, storage_url: str, study_name: str, seed: int = 0, max_attempts: int = 200,
                 judged: dict[str, float | None] | None = None, first: tuple[dict[str, Any], ...] = ()):
        """``judged``: candidate hash -> objective of the run's recorded evaluations (the store is the truth: a
        kill between recording a verdict and telling the study leaves that trial RUNNING though it was judged);
        ``first``: configs of this space (``first_configs``) a new study judges before the heuristic."""
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.space = space
        self.source = template_source(space.template)
        self.max_attempts = max_attempts
        self.study = optuna.create_study(
            study_name=study_name, storage=storage_url, direction="minimize", load_if_exists=True,
            # constant_liar: trials asked while others are still being judged (--workers N) avoid their configs
            sampler=optuna.samplers.TPESampler(seed=seed, n_startup_trials=6, multivariate=True, constant_liar=True))
        self._dist = {k: optuna.distributions.CategoricalDistribution(v) for k, v in space.axes.items()}
        # judged candidates only: a trial left RUNNING by a kill was judged only if the store has its verdict
        judged = judged or {}
        self._seen: dict[str, float | None] = {}
        for t in self.study.trials:
            h = t.user_attrs.get("candidate")
            if h in judged:
                self._seen[h] = judged[h]
            elif h and t.state.is_finished():
                self._seen[h] = t.value
        self._requeue_interrupted()
        if not self.study.trials:
            for config in first:
                self.study.enqueue_trial(config)
            self.study.enqueue_trial(space.heuristic())

    def _requeue_interrupted(self) -> None:
        """Trials left RUNNING by a killed search: those whose candidate the store has a verdict for are completed
        with its objective; the others are failed and their configs queued again (nothing lost, nothing twice)."""
        import optuna

        for t in self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
            h = t.user_attrs.get("candidate")
            value = self._seen.get(h) if h else None
            if h in self._seen and value is not None and math.isfinite(value):
                self.study._storage.set_trial_state_values(t._trial_id, optuna.trial.TrialState.COMPLETE, [value])
                continue
            self.study._storage.set_trial_state_values(t._trial_id, optuna.trial.TrialState.FAIL)
            if t.params and h not in self._seen:
                self.study.enqueue_trial(t.params, skip_if_exists=False)

    def propose(self) -> Proposal | None:
        import optuna

        n_configs = len(self.space.enumerate())
        for _ in range(self.max_attempts):
            if len(self._seen) >= n_configs:
                return None
            trial = self.study.ask(self._dist)
            config = dict(trial.params)
            ok, _why = self.space.valid(config)
            if not ok:
                self.study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                continue
            cand = Candidate(op=self.space.op, source=self.source, config=config, origin=self.name)
            if cand.hash in self._seen:  # already judged: tell TPE the known outcome, ask again
                value = self._seen[cand.hash]
                if value is None:
                    self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
                else:
                    self.study.tell(trial, value)
                continue
            trial.set_user_attr("candidate", cand.hash)
            return Proposal(cand, handle=trial.number, meta={"trial": trial.number})
        return None

    def withdraw(self, proposal: Proposal) -> None:
        """A proposal not judged (its candidate is already in flight on another worker): its trial is pruned."""
        import optuna

        self.study.tell(proposal.handle, state=optuna.trial.TrialState.PRUNED)

    def feedback(self, proposal: Proposal, verdict: dict, objective: float | None) -> None:
        import optuna

        self._seen[proposal.candidate.hash] = objective
        if objective is None or not math.isfinite(objective):
            self.study.tell(proposal.handle, state=optuna.trial.TrialState.FAIL)
        else:
            self.study.tell(proposal.handle, objective)


class MixedProposer:
    """Turns between the offline proposers of one op group's templates (each its own Optuna study); a proposal
    names its template in ``meta``, so feedback reaches the study that made it."""

    name = "offline"

    def __init__(self, proposers: list[OfflineProposer]):
        self.by_template = {p.space.template: p for p in proposers}
        self.turns = list(self.by_template)
        self.turn = 0
        self.done: set[str] = set()

    def propose(self) -> Proposal | None:
        while len(self.done) < len(self.turns):
            template = self.turns[self.turn % len(self.turns)]
            self.turn += 1
            if template in self.done:
                continue
            proposal = self.by_template[template].propose()
            if proposal is None:
                self.done.add(template)
                continue
            proposal.meta["template"] = template
            return proposal
        return None

    def withdraw(self, proposal: Proposal) -> None:
        self.by_template[proposal.meta["template"]].withdraw(proposal)

    def feedback(self, proposal: Proposal, verdict: dict, objective: float | None) -> None:
        self.by_template[proposal.meta["template"]].feedback(proposal, verdict, objective)


def runnable(space: Space, backend: str) -> tuple[list[Space], list[str]]:
    """The space's templates whose candidates can run on ``backend`` (each without alternatives), and a note for
    each one skipped: CuTe DSL templates need the GPU and the ``[cute]`` extra (rsi.kernel.cute_unavailable)."""
    from rsi.harness.static_cute import kernel_language
    from rsi.kernel import cute_unavailable

    keep, notes = [], []
    for template in space.templates:
        why = cute_unavailable(backend) if kernel_language(template_source(template)) == "cute" else ""
        if why:
            notes.append(f"template {template} (CuTe DSL) skipped: {why}")
        else:
            keep.append(space.select(template))
    return keep, notes


def first_configs(space: Space, given: tuple[dict[str, Any], ...]) -> tuple[dict[str, Any], ...]:
    """The ``--first`` configs that belong to this template's space, completed with its heuristic's values."""
    out = []
    for g in given:
        if all(k in space.axes and v in space.axes[k] for k, v in g.items()):   # before the predicates read them
            config = {**space.heuristic(), **g}
            if space.valid(config)[0]:
                out.append(config)
    return tuple(out)


def check_first(spaces: list[Space], first: tuple[dict[str, Any], ...]) -> None:
    """ValueError naming the axes when a ``--first`` config belongs to none of the templates searched."""
    for g in first:
        if not any(first_configs(s, (g,)) for s in spaces):
            axes = "; ".join(f"{s.template}: " + ", ".join(f"{k} {list(v)}" for k, v in s.axes.items())
                             for s in spaces)
            raise ValueError(f"--first {g}: no template searched here admits it (its axes and their values, "
                             f"and the space's predicates; {axes})")


def offline_proposer(spaces: list[Space], storage_url: str, study_name: str, seed: int = 0,
                     judged: dict[str, float | None] | None = None, first: tuple[dict[str, Any], ...] = ()):
    """One OfflineProposer for a single template (the study keeps its name, so older runs resume), else their
    MixedProposer (the first template's study named ``study_name``, the others ``study_name:<template>``);
    ``judged`` as OfflineProposer's; ``first``: configs to judge before the heuristic (each goes to every template
    whose axes and predicates admit it: ``check_first``)."""
    mine = [first_configs(s, first) for s in spaces]
    proposers = [OfflineProposer(s, storage_url, study_name if i == 0 else f"{study_name}:{s.template}", seed=seed,
                                 judged=judged, first=mine[i]) for i, s in enumerate(spaces)]
    return proposers[0] if len(proposers) == 1 else MixedProposer(proposers)


def objective_of(verdict: dict, backend: str, incumbents: tuple[str, ...] = (),
                 buckets: tuple[str, ...] | None = None) -> float | None:
    """Minimised by the optimizer (lower is better): geometric mean over buckets (``buckets``, the candidate's
    template's, where given: the ones it is promoted on; else every timed one) of candidate p50 / the fastest
    p50 among eager, torch.compile, the current verified kernel ("best") and the op group's declared incumbents
    (``incumbents``: OpGroup.baselines names, e.g. attention's SDPA backends). Below 1: faster than all of them.
    Other timed entries (the same-bytes copy, Liger, the candidate's own A/A timing) are not competitors.

    Rejected -> None (a failed trial); so is an accepted verdict whose times are missing or not positive and finite
    (nothing to rank). Under the interpreter every accepted candidate scores 1.0 (no timing).
    """
    if verdict["status"] != "accepted":
        return None
    rows = [r for r in verdict.get("timings", []) if buckets is None or r.get("bucket") in buckets]
    if backend != "cuda" or not rows:
        return 1.0
    logs = []
    for r in rows:
        rivals = ("compile", "best", "eager", *incumbents)
        base = [b.get("p50_us") for k, b in r.get("baselines", {}).items() if k in rivals]
        times = [r.get("p50_us"), *base]
        if not base or not all(isinstance(t, (int, float)) and math.isfinite(t) and t > 0 for t in times):
            return None
        logs.append(math.log(r["p50_us"] / min(base)))
    return math.exp(sum(logs) / len(logs))
