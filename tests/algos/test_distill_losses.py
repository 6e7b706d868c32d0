"""Distillation divergences against numbers worked out by hand, and against the full-vocabulary value."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from mathgym.algos.distill_losses import (  # noqa: E402
    DIVERGENCES,
    distillation_loss,
    student_buckets,
    teacher_top_k,
    token_divergence,
)
from mathgym.errors import ConfigError  # noqa: E402

ln = math.log

# Teacher p = (1/2, 1/4, 1/8, 1/8), student q = (1/4, 1/8, 1/8, 1/2), logits = log-probs.
P = torch.tensor([0.5, 0.25, 0.125, 0.125]).log()
Q = torch.tensor([0.25, 0.125, 0.125, 0.5]).log()


def _value(divergence: str, k: int, beta: float = 0.5, skew: float = 0.1) -> float:
    return float(token_divergence(teacher_top_k(P, k), Q, divergence, beta=beta, skew=skew))


def test_teacher_top_k_keeps_the_rest_mass_and_the_student_is_read_on_the_teachers_tokens():
    top = teacher_top_k(P, k=2)
    assert top.indices.tolist() == [0, 1]
    assert top.logprobs.exp().tolist() == pytest.approx([0.5, 0.25])
    assert float(top.rest_logprob.exp()) == pytest.approx(0.25)  # 1/8 + 1/8
    # the student on tokens 0 and 1 (1/4, 1/8), and everything else: 1/8 + 1/2 = 5/8
    assert student_buckets(Q, top.indices).exp().tolist() == pytest.approx([0.25, 0.125, 0.625])
    assert float(teacher_top_k(P, k=0).rest_logprob) == -math.inf  # whole vocabulary: no rest


# k = 2: buckets p = (1/2, 1/4, rest 1/4), q = (1/4, 1/8, rest 5/8).
# jsd (beta = 1/2) and the skews at lam = 1/2 share m = (p + q) / 2 = (3/8, 3/16, 7/16).
# jsd beta = 1/4: m = p/4 + 3q/4 = (5/16, 5/32, 17/32).  skew lam = 0.1: m = 0.1 p + 0.9 q = (0.275, 0.1375, 0.5875).
# skew reverse lam = 0.1: m = 0.1 q + 0.9 p = (0.475, 0.2375, 0.2875).
TOP2_BY_HAND = [
    # 1/2 ln 2 + 1/4 ln 2 + 1/4 ln(2/5) = 0.290787
    ("forward_kl", {}, 0.5 * ln(2) + 0.25 * ln(2) + 0.25 * ln(0.25 / 0.625)),
    # 1/4 ln(1/2) + 1/8 ln(1/2) + 5/8 ln(5/2) = 0.312752
    ("reverse_kl", {}, 0.25 * ln(0.5) + 0.125 * ln(0.5) + 0.625 * ln(2.5)),
    # 1/2 [3/4 ln(4/3) + 1/4 ln(4/7)] + 1/2 [3/8 ln(2/3) + 5/8 ln(10/7)] = 0.073365
    ("jsd", {"beta": 0.5}, 0.5 * (0.75 * ln(4 / 3) + 0.25 * ln(4 / 7)) + 0.5 * (0.375 * ln(2 / 3) + 0.625 * ln(10 / 7))),
    # 1/4 KL(p || m) + 3/4 KL(q || m), m = (5/16, 5/32, 17/32)
    (
        "jsd", {"beta": 0.25},
        0.25 * (0.5 * ln(0.5 / 0.3125) + 0.25 * ln(0.25 / 0.15625) + 0.25 * ln(0.25 / 0.53125))
        + 0.75 * (0.25 * ln(0.25 / 0.3125) + 0.125 * ln(0.125 / 0.15625) + 0.625 * ln(0.625 / 0.53125)),
    ),
    # KL(p || (p + q) / 2) = 3/4 ln(4/3) + 1/4 ln(4/7): the teacher's half of jsd(1/2), doubled
    ("skew_forward_kl", {"skew": 0.5}, 0.75 * ln(4 / 3) + 0.25 * ln(4 / 7)),
    ("skew_forward_kl", {"skew": 0.1}, 0.5 * ln(0.5 / 0.275) + 0.25 * ln(0.25 / 0.1375) + 0.25 * ln(0.25 / 0.5875)),
    # KL(q || (q + p) / 2) = 3/8 ln(2/3) + 5/8 ln(10/7)
    ("skew_reverse_kl", {"skew": 0.5}, 0.375 * ln(2 / 3) + 0.625 * ln(10 / 7)),
    ("skew_reverse_kl", {"skew": 0.1}, 0.25 * ln(0.25 / 0.475) + 0.125 * ln(0.125 / 0.2375) + 0.625 * ln(0.625 / 0.2875)),
    # lam = 0: the plain KLs
    ("skew_forward_kl", {"skew": 0.0}, 0.5 * ln(2) + 0.25 * ln(2) + 0.25 * ln(0.25 / 0.625)),
    ("skew_reverse_kl", {"skew": 0.0}, 0.25 * ln(0.5) + 0.125 * ln(0.5) + 0.625 * ln(2.5)),
]


@pytest.mark.parametrize("divergence, params, expected", TOP2_BY_HAND)
def test_top2_with_the_rest_bucket_by_hand(divergence, params, expected):
    assert _value(divergence, k=2, **params) == pytest.approx(expected, abs=1e-6)


# k = 4 (the whole vocabulary): p = (1/2, 1/4, 1/8, 1/8), q = (1/4, 1/8, 1/8, 1/2).
# forward: 1/2 ln 2 + 1/4 ln 2 + 0 + 1/8 ln(1/4) = 1/2 ln 2.  reverse: 1/4 ln(1/2) + 1/8 ln(1/2) + 0 + 1/2 ln 4 = 5/8 ln 2.
FULL_BY_HAND = [("forward_kl", 0.5 * ln(2)), ("reverse_kl", 0.625 * ln(2))]


@pytest.mark.parametrize("divergence, expected", FULL_BY_HAND)
def test_whole_vocabulary_by_hand(divergence, expected):
    assert _value(divergence, k=4) == pytest.approx(expected, abs=1e-6)
    assert _value(divergence, k=0) == pytest.approx(expected, abs=1e-6)
    assert _value(divergence, k=2) < expected  # merging outcomes can only lower a divergence


def test_temperature_of_each_side_by_hand():
    # teacher logits (2 ln 2, 0, 0, 0) at T = 2: softmax(ln 2, 0, 0, 0) = (2, 1, 1, 1) / 5 = (0.4, 0.2, 0.2, 0.2)
    # student logits (ln 3 / 2, 0, 0, 0) at T = 1/2: softmax(ln 3, 0, 0, 0) = (3, 1, 1, 1) / 6 = (1/2, 1/6, 1/6, 1/6)
    teacher = torch.tensor([2 * ln(2), 0.0, 0.0, 0.0])
    student = torch.tensor([ln(3) / 2, 0.0, 0.0, 0.0])
    top1 = teacher_top_k(teacher, k=1, temperature=2.0)
    assert float(top1.rest_logprob.exp()) == pytest.approx(0.6)
    # k = 1: buckets (0.4, 0.6) vs (0.5, 0.5): 0.4 ln(0.8) + 0.6 ln(1.2) = 0.020135
    expected = 0.4 * ln(0.8) + 0.6 * ln(1.2)
    assert float(token_divergence(top1, student, "forward_kl", student_temperature=0.5)) == pytest.approx(expected, abs=1e-6)
    # reverse: 0.5 ln(0.5 / 0.4) + 0.5 ln(0.5 / 0.6) = 0.020411
    expected = 0.5 * ln(1.25) + 0.5 * ln(0.5 / 0.6)
    assert float(token_divergence(top1, student, "reverse_kl", student_temperature=0.5)) == pytest.approx(expected, abs=1e-6)
    # without the temperatures: teacher (4, 1, 1, 1) / 7, student (sqrt 3, 1, 1, 1) / (3 + sqrt 3): not the same number
    assert float(token_divergence(teacher_top_k(teacher, k=1), student, "forward_kl")) != pytest.approx(0.4 * ln(0.8) + 0.6 * ln(1.2))


def _full_vocabulary(divergence: str, teacher: torch.Tensor, student: torch.Tensor, beta: float, skew: float) -> torch.Tensor:
    """The divergence written directly over the whole vocabulary, in probabilities."""
    p, q = teacher.softmax(-1), student.softmax(-1)

    def kl(a, b):
        return (a * (a / b).log()).sum(-1)

    return {
        "forward_kl": lambda: kl(p, q),
        "reverse_kl": lambda: kl(q, p),
        "jsd": lambda: beta * kl(p, beta * p + (1 - beta) * q) + (1 - beta) * kl(q, beta * p + (1 - beta) * q),
        "skew_forward_kl": lambda: kl(p, skew * p + (1 - skew) * q),
        "skew_reverse_kl": lambda: kl(q, skew * q + (1 - skew) * p),
    }[divergence]()


@pytest.mark.parametrize("divergence", list(DIVERGENCES))
def test_k_equal_to_the_vocabulary_gives_the_full_vocabulary_value_with_finite_gradients(divergence):
    gen = torch.Generator().manual_seed(0)
    teacher, student = torch.randn(2, 3, 11, generator=gen) * 3, torch.randn(2, 3, 11, generator=gen) * 3
    student.requires_grad_(True)
    value = token_divergence(teacher_top_k(teacher, k=11, temperature=1.5), student, divergence, 0.7, beta=0.3, skew=0.2)
    expected = _full_vocabulary(divergence, teacher / 1.5, student.detach() / 0.7, beta=0.3, skew=0.2)
    assert value.shape == (2, 3)
    assert value.detach() == pytest.approx(expected, abs=1e-5)
    value.sum().backward()
    assert torch.isfinite(student.grad).all() and student.grad.abs().sum() > 0
    # a smaller k: a lower bound, and gradients still finite
    student.grad = None
    truncated = token_divergence(teacher_top_k(teacher, k=3, temperature=1.5), student, divergence, 0.7, beta=0.3, skew=0.2)
    assert (truncated.detach() <= expected + 1e-6).all()
    truncated.sum().backward()
    assert torch.isfinite(student.grad).all()


def test_the_same_distribution_is_zero_and_an_unknown_divergence_names_the_choices():
    for divergence in DIVERGENCES:
        assert _value(divergence, 2) > 0
        assert float(token_divergence(teacher_top_k(P, 2), P.clone(), divergence)) == pytest.approx(0.0, abs=1e-7)
    with pytest.raises(ConfigError, match="divergence='tvd' is not allowed; choose one of 'forward_kl'"):
        token_divergence(teacher_top_k(P, 2), Q, "tvd")


def test_distillation_loss_mixes_cross_entropy_and_divergence_over_masked_tokens():
    logprobs = torch.tensor([[-1.0, -3.0, -9.0]])
    divergence = torch.tensor([[0.5, 1.5, 7.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])  # the last token is not learned
    # CE = (1 + 3) / 2 = 2, D = (0.5 + 1.5) / 2 = 1: w = 0 -> 2, w = 1 -> 1, w = 0.25 -> 0.75 * 2 + 0.25 * 1
    for weight, expected in ((0.0, 2.0), (1.0, 1.0), (0.25, 1.75)):
        loss, stats = distillation_loss(logprobs, divergence, mask, weight)
        assert float(loss) == pytest.approx(expected)
        assert (float(stats.cross_entropy), float(stats.divergence)) == pytest.approx((2.0, 1.0))
