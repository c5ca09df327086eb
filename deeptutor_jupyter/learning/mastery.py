"""Mastery per objective by Bayesian Knowledge Tracing, fed only by graded evidence.

BKT (Corbett & Anderson, 1995) keeps one probability per objective: that the learner knows it.
Each graded answer updates it by Bayes' rule, given how often a learner who knows it still slips
and how often one who does not guesses right; then learning may happen with ``p_learn``:

    P(L | right) = P(L)(1 - slip) / [P(L)(1 - slip) + (1 - P(L)) guess]
    P(L | wrong) = P(L) slip      / [P(L) slip       + (1 - P(L)) (1 - guess)]
    P(L') = P(L | obs) + (1 - P(L | obs)) p_learn

A partly right answer (score ``s`` between 0 and 1) mixes the two posteriors with weights ``s``
and ``1 - s``. The guess rate depends on the kind of question: a learner guesses one of four
options far more often than a number or passing code. The only input is :class:`Evidence`
built from graded results (learning/quiz.py, learning/sandbox.py); nothing the model says about
the learner moves the estimate, so a gate (learning/path.py) cannot be talked past.
"""

from __future__ import annotations

from dataclasses import dataclass

MASTERY_THRESHOLD = 0.85  # a gate opens above this
MIN_EVIDENCE = 3  # ... and after at least this many graded answers


@dataclass(frozen=True)
class BKTParams:
    p_init: float = 0.2
    p_learn: float = 0.15
    p_slip: float = 0.1


# Chance of a right answer without knowing, per question kind (choice: from its option count).
GUESS = {"numeric": 0.05, "code": 0.05, "short": 0.15}


def guess_rate(kind: str, options: int = 0) -> float:
    if kind == "choice":
        return 1.0 / max(2, options) if options else 0.25
    return GUESS.get(kind, 0.1)


@dataclass(frozen=True)
class Evidence:
    """One graded answer: its score in [0, 1] and the guess rate of its question."""

    score: float
    guess: float
    ts: float = 0.0


@dataclass(frozen=True)
class Mastery:
    p: float  # probability that the objective is known
    n: int  # graded answers seen

    @property
    def mastered(self) -> bool:
        return self.p >= MASTERY_THRESHOLD and self.n >= MIN_EVIDENCE

    @property
    def confidence(self) -> str:
        """How much evidence stands behind ``p``, in words for the learner."""
        if self.n == 0:
            return "no evidence yet"
        if self.n < MIN_EVIDENCE:
            return "little evidence"
        return "some evidence" if self.n < 2 * MIN_EVIDENCE else "good evidence"


def update(p: float, e: Evidence, params: BKTParams = BKTParams()) -> float:
    slip, guess = params.p_slip, min(max(e.guess, 0.0), 0.5)
    right = p * (1 - slip) / (p * (1 - slip) + (1 - p) * guess)
    wrong = p * slip / (p * slip + (1 - p) * (1 - guess))
    s = min(max(e.score, 0.0), 1.0)
    posterior = s * right + (1 - s) * wrong
    return posterior + (1 - posterior) * params.p_learn


def estimate(evidence: list[Evidence], params: BKTParams = BKTParams()) -> Mastery:
    """Replay the evidence in time order; the same evidence always gives the same estimate."""
    p = params.p_init
    for e in sorted(evidence, key=lambda item: item.ts):
        p = update(p, e, params)
    return Mastery(round(p, 4), len(evidence))
