"""LeNet++'s PReLU: torch.nn.PReLU's function, gradients and state dict, computed faster."""
import pytest
import torch

from agnostophobia.models import build_model
from agnostophobia.models.lenetpp import PReLU


def _pair(channels: int):
    ours, theirs = PReLU(channels), torch.nn.PReLU(channels)
    with torch.no_grad():  # distinct slopes per channel, one of them negative
        slopes = torch.linspace(-0.5, 0.9, channels)
        ours.weight.copy_(slopes)
        theirs.weight.copy_(slopes)
    return ours, theirs


@pytest.mark.parametrize("shape", [(4, 3, 5, 5), (6, 3), (2, 3, 7)])
def test_prelu_equals_torch_prelu_in_value_and_gradients(shape):
    ours, theirs = _pair(shape[1])
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0))
    x[0, 0] = 0.0  # exactly zero: the value agrees (the gradient there is a choice, below)
    upstream = torch.randn(shape, generator=torch.Generator().manual_seed(1))
    results = []
    for module in (ours, theirs):
        xi = x.clone().requires_grad_(True)
        y = module(xi)
        y.backward(upstream)
        results.append((y.detach(), xi.grad, module.weight.grad))
    (y1, gx1, gw1), (y2, gx2, gw2) = results
    torch.testing.assert_close(y1, y2, rtol=0, atol=1e-7)
    nonzero = x != 0
    torch.testing.assert_close(gx1[nonzero], gx2[nonzero], rtol=0, atol=1e-6)
    torch.testing.assert_close(gw1, gw2, rtol=1e-5, atol=1e-6)


def test_prelu_keeps_torch_prelu_state_dict_and_initialisation():
    ours, theirs = PReLU(8), torch.nn.PReLU(8)
    assert ours.state_dict().keys() == theirs.state_dict().keys()
    torch.testing.assert_close(ours.weight, theirs.weight)
    theirs.load_state_dict(ours.state_dict())  # checkpoints of either load into the other


def test_prelu_under_bf16_autocast_stays_bf16_and_close_to_fp32():
    ours, _ = _pair(4)
    x = torch.randn(8, 4, 6, 6, generator=torch.Generator().manual_seed(2)).bfloat16()
    out = ours(x)
    assert out.dtype == torch.bfloat16
    reference = torch.nn.functional.prelu(x.float(), ours.weight.detach())
    torch.testing.assert_close(out.float(), reference, rtol=2 ** -7, atol=1e-6)


def test_prelu_with_wrong_channel_count_is_torch_error():
    with pytest.raises(RuntimeError, match="[Mm]ismatch|channel|num_parameters|size"):
        PReLU(4)(torch.randn(2, 3, 5, 5))


def test_lenetpp_uses_the_fast_prelu_after_every_convolution():
    model = build_model("lenet++", num_outputs=10, activation="prelu")
    convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    prelus = [m for m in model.modules() if isinstance(m, PReLU)]
    assert len(prelus) == len(convs) == 6
    assert [p.num_parameters for p in prelus] == [c.out_channels for c in convs]
