"""DPO-family losses against hand-computed numbers."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from mathgym.algos.dpo_losses import preference_loss  # noqa: E402
from mathgym.errors import ConfigError  # noqa: E402


def _pair(pc, pr, rc, rr, requires_grad=False):
    policy = torch.tensor([pc, pr], requires_grad=requires_grad)
    return policy, policy[0:1], policy[1:2], torch.tensor([rc]), torch.tensor([rr])


def softplus(x):
    return math.log1p(math.exp(x))


# chosen: policy -1 vs ref -2 (ratio +1); rejected: policy -3 vs ref -2 (ratio -1); h = 2.
H_CASE = (-1.0, -3.0, -2.0, -2.0)
BETA = 0.5  # beta * h = 1


@pytest.mark.parametrize(
    "loss_type, smoothing, expected",
    [
        ("sigmoid", 0.0, softplus(-1)),  # -log sigmoid(1) = log(1 + e^-1) = 0.31326
        ("sigmoid", 0.1, 0.9 * softplus(-1) + 0.1 * softplus(1)),  # cDPO: 0.41326
        ("ipo", 0.0, (2 - 1 / (2 * BETA)) ** 2),  # (h - 1/(2 beta))^2 = 1
        ("hinge", 0.0, 0.0),  # max(0, 1 - 1)
        ("robust", 0.1, (0.9 * softplus(-1) - 0.1 * softplus(1)) / 0.8),  # 0.18826
    ],
)
def test_losses_by_hand(loss_type, smoothing, expected):
    _, pc, pr, rc, rr = _pair(*H_CASE)
    loss, stats = preference_loss(pc, pr, rc, rr, beta=BETA, loss_type=loss_type, label_smoothing=smoothing)
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    assert float(stats.chosen_reward) == pytest.approx(0.5)
    assert float(stats.rejected_reward) == pytest.approx(-0.5)
    assert float(stats.margin) == pytest.approx(1.0)
    assert float(stats.accuracy) == 1.0
    assert float(stats.chosen_logp) == -1.0 and float(stats.rejected_logp) == -3.0


def test_hinge_and_ipo_below_margin():
    # h = 0.5, beta = 0.5: hinge = 1 - 0.25 = 0.75; ipo = (0.5 - 1)^2 = 0.25
    args = (torch.tensor([-1.0]), torch.tensor([-1.5]), torch.tensor([-1.0]), torch.tensor([-1.0]))
    assert float(preference_loss(*args, beta=0.5, loss_type="hinge")[0]) == pytest.approx(0.75)
    assert float(preference_loss(*args, beta=0.5, loss_type="ipo")[0]) == pytest.approx(0.25)


def test_large_beta_margin_is_numerically_stable():
    # beta * h = +-2000: log(sigmoid(-2000)) underflows naively; logsigmoid gives exactly -2000.
    policy = torch.tensor([1000.0, -1000.0, -1000.0, 1000.0], requires_grad=True)
    zeros = torch.zeros(2)
    loss, stats = preference_loss(policy[0:2], policy[2:4], zeros, zeros, beta=1.0)
    # pair 1: h = 2000 -> loss 0; pair 2: h = -2000 -> loss 2000; mean 1000.
    assert math.isfinite(loss.item()) and loss.item() == pytest.approx(1000.0)
    loss.backward()
    assert torch.isfinite(policy.grad).all()
    # dL/dh = -beta * sigmoid(-beta h) / N: 0 for pair 1, -0.5 for pair 2.
    assert policy.grad.tolist() == pytest.approx([0.0, -0.5, 0.0, 0.5])
    assert float(stats.accuracy) == 0.5


def test_gradient_direction_increases_margin():
    policy = torch.tensor([-2.0, -2.0], requires_grad=True)
    ref = torch.tensor([-2.0])
    for loss_type in ("sigmoid", "ipo", "hinge", "robust"):
        policy.grad = None
        loss, _ = preference_loss(policy[0:1], policy[1:2], ref, ref, beta=0.1, loss_type=loss_type,
                                  label_smoothing=0.1 if loss_type == "robust" else 0.0)
        loss.backward()
        assert policy.grad[0] < 0 < policy.grad[1], loss_type


def test_reference_gets_no_gradient():
    ref = torch.tensor([-1.0], requires_grad=True)
    pc = torch.tensor([-1.0], requires_grad=True)
    loss, _ = preference_loss(pc, pc * 2, ref, ref, beta=0.1)
    loss.backward()
    assert ref.grad is None


@pytest.mark.parametrize(
    "kwargs, field",
    [({"loss_type": "kto"}, "loss_type"), ({"beta": 0.0}, "beta"),
     ({"loss_type": "robust", "label_smoothing": 0.5}, "label_smoothing"), ({"label_smoothing": -0.1}, "label_smoothing")],
)
def test_bad_options(kwargs, field):
    z = torch.zeros(1)
    with pytest.raises(ConfigError, match=field):
        preference_loss(z, z, z, z, **kwargs)
