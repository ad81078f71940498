"""The hybrid half of an LLM search: the offline optimizer tunes one proposed structure's declared parameters.

A structure is a reply's module; its ``TUNABLE`` tuple names launch parameters and their values. After the
structure itself is judged (at its defaults, the study's first, known trial), Optuna TPE proposes up to N more
configs of the same source before the next model call. The study lives in the run's database like the offline
proposer's, so a resumed run continues it; a trial left running by a killed search is queued again.
"""

from __future__ import annotations

import math
from typing import Any

from rsi.contract import Candidate, canonical_json
from rsi.llm.reply import Tunable
from rsi.search.propose import Proposal


class StructureTuner:
    def __init__(self, structure: Candidate, tunable: Tunable, objective: float, n_trials: int, done: int,
                 storage_url: str, study_name: str, seed: int, origin: str, meta: dict[str, Any]):
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.structure, self.origin, self.meta = structure, origin, meta
        self.n_trials, self.proposed = n_trials, done
        self.names = [name for name, _ in tunable]
        self.combos = math.prod(len(v) for _, v in tunable)
        self.dist = {name: optuna.distributions.CategoricalDistribution(values) for name, values in tunable}
        self.study = optuna.create_study(
            study_name=study_name, storage=storage_url, direction="minimize", load_if_exists=True,
            sampler=optuna.samplers.TPESampler(seed=seed, n_startup_trials=min(4, max(n_trials, 1)),
                                               multivariate=True))
        if not self.study.trials:  # the structure's own verdict is the first data point
            self.study.add_trial(optuna.trial.create_trial(
                params=dict(structure.config), distributions=self.dist, value=objective,
                user_attrs={"candidate": structure.hash}))
        # keyed by config, not hash: a tuned candidate's parent is the structure, so its hash differs from the
        # structure's own even at the same config
        self.seen: dict[str, float | None] = {
            canonical_json(t.params): t.value for t in self.study.trials
            if t.state.is_finished() and t.user_attrs.get("candidate") and not t.user_attrs.get("interrupted")}
        # a trial left running by a killed search never got a verdict: queue its config again
        for t in self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
            self.study._storage.set_trial_user_attr(t._trial_id, "interrupted", True)
            self.study._storage.set_trial_state_values(t._trial_id, optuna.trial.TrialState.FAIL)
            if t.params:
                self.study.enqueue_trial(t.params, skip_if_exists=False)

    def propose(self) -> Proposal | None:
        import optuna

        for _ in range(4 * self.combos + 10):
            if self.proposed >= self.n_trials or len(self.seen) >= self.combos:
                return None
            trial = self.study.ask(self.dist)
            config = {name: trial.params[name] for name in self.names}
            cand = Candidate(op=self.structure.op, source=self.structure.source, config=config,
                             parent=self.structure.hash, origin=self.origin)
            if canonical_json(config) in self.seen:  # judged already: tell TPE the known outcome and ask again
                value = self.seen[canonical_json(config)]
                if value is None:
                    self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
                else:
                    self.study.tell(trial, value)
                continue
            trial.set_user_attr("candidate", cand.hash)
            self.proposed += 1
            return Proposal(cand, handle=trial.number, meta={**self.meta, "kind": "tune", "trial": trial.number})
        return None

    def feedback(self, proposal: Proposal, objective: float | None) -> None:
        import optuna

        self.seen[canonical_json(dict(proposal.candidate.config))] = objective
        if objective is None or not math.isfinite(objective):
            self.study.tell(proposal.handle, state=optuna.trial.TrialState.FAIL)
        else:
            self.study.tell(proposal.handle, objective)
