"""torchvision backbones as open-set networks (agnostophobia.models.backbones): shapes, the
normalisation as first layer, a frozen trunk, weights from a file or by name, clear errors.

Small models at tiny inputs, one thread: every test takes well under a few seconds."""
import pytest
import torch
import torchvision
from torch import nn

from agnostophobia.errors import ConfigError
from agnostophobia.models import MODELS, build_model, loaded_weights
from agnostophobia.models.backbones import IMAGENET_MEAN, IMAGENET_STD, Normalize
from agnostophobia.training.config import TrainConfig
from agnostophobia.training.fitting import fit
from synthetic import synthetic_protocol

# one with a plain fc head, one with a hidden layer and dropout in its classifier, one whose
# classifier is a 1x1 convolution
SMALL = ["resnet18", "mobilenet_v3_small", "squeezenet1_1"]


@pytest.fixture(autouse=True)
def one_thread():
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def backbone(arch, **kwargs):
    torch.manual_seed(0)
    return build_model(f"torchvision/{arch}", num_outputs=kwargs.pop("num_outputs", 4), **kwargs)


def first_conv(model) -> nn.Conv2d:
    return next(m for m in model.backbone.modules() if isinstance(m, nn.Conv2d))


@pytest.mark.parametrize("arch", SMALL)
def test_outputs_are_logits_and_deep_features_for_rgb_and_grey(arch):
    model = backbone(arch, feature_dim=6, num_outputs=5).eval()
    for channels in (3, 1):
        logits, features = model(torch.rand(2, channels, 32, 32))
        assert logits.shape == (2, 5) and features.shape == (2, 6)
    assert model.logits.bias is None  # F = 0 gives equal logits (Theorem 1)
    # F feeds the logit layer: the logits are the features times its weight
    torch.testing.assert_close(logits, features @ model.logits.weight.T)


@pytest.mark.parametrize("arch", SMALL)
def test_normalisation_is_the_first_layer(arch):
    model = backbone(arch).eval()
    assert isinstance(next(model.children()), Normalize)
    trunk_inputs = []
    first_conv(model).register_forward_pre_hook(lambda module, args: trunk_inputs.append(args[0]))
    mean_colour = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1).expand(2, 3, 32, 32)
    model(mean_colour)
    assert trunk_inputs[-1].abs().max() < 1e-6  # the trunk sees normalised images: the mean colour is 0
    model(torch.full((1, 1, 32, 32), 0.5))  # a grey image is repeated to the three channels
    expected = (0.5 - torch.tensor(IMAGENET_MEAN)) / torch.tensor(IMAGENET_STD)
    torch.testing.assert_close(trunk_inputs[-1][0, :, 0, 0], expected)


@pytest.mark.parametrize("spelling", [{"freeze": "backbone"}, {"freeze": "none"}, {"freeze_backbone": True},
                                      {"freeze_backbone": False}, {}], ids=str)
@pytest.mark.parametrize("arch", SMALL)
def test_a_frozen_trunk_keeps_its_weights_and_batchnorm_statistics(arch, spelling):
    """``freeze: backbone`` (and ``freeze_backbone: true``, the older spelling runs were trained with)."""
    freeze = spelling in ({"freeze": "backbone"}, {"freeze_backbone": True})
    model = backbone(arch, **spelling).train()
    trunk_before = {k: v.clone() for k, v in model.backbone.state_dict().items()}
    head_before = model.features.weight.clone()
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    logits, _ = model(torch.rand(4, 3, 32, 32))
    nn.functional.cross_entropy(logits, torch.tensor([0, 1, 2, 3])).backward()
    optimizer.step()
    trunk_after = model.backbone.state_dict()
    unchanged = all(torch.equal(trunk_before[k], trunk_after[k]) for k in trunk_before)
    assert unchanged == freeze  # trained normally, the trunk's weights (and BatchNorm statistics) move
    assert not torch.equal(head_before, model.features.weight)  # the head trains either way
    assert model.backbone.training == (not freeze) and model.features.training
    assert all(p.requires_grad != freeze for p in model.backbone.parameters())


def test_a_frozen_trunk_stays_frozen_through_a_training_run(tmp_path):
    """The trainer calls model.train() every epoch; grey 28x28 synthetic images go in as they are."""
    cfg = TrainConfig(model="torchvision/mobilenet_v3_small", model_kwargs={"feature_dim": 4, "freeze": "backbone"},
                      approach="entropic", epochs=1, batch_size=24, lr=1e-2, tensorboard=False, progress=False,
                      cpu_threads=1).validate()
    torch.manual_seed(cfg.seed)
    reference = build_model(cfg.model, num_outputs=3, **cfg.model_kwargs).backbone.state_dict()
    run = fit(cfg, synthetic_protocol(), tmp_path)
    trained = run.model.backbone.state_dict()
    assert all(torch.equal(reference[k], trained[k]) for k in reference)
    assert (tmp_path / "last.pt").exists()


def test_weights_from_a_local_state_dict_file(tmp_path):
    torch.manual_seed(1)
    source = torchvision.models.resnet18(num_classes=7)  # a classifier of another size is dropped
    path = tmp_path / "resnet18.pth"
    torch.save(source.state_dict(), path)
    model = backbone("resnet18", weights=str(path))
    expected = {k: v for k, v in source.state_dict().items() if not k.startswith("fc.")}
    loaded = model.backbone.state_dict()
    assert loaded.keys() == expected.keys()
    assert all(torch.equal(loaded[k], expected[k]) for k in expected)
    assert loaded_weights(model) == (f"weights {path}: {len(expected)} of {len(model.state_dict())} tensors loaded "
                                     f"(the trunk; the feature and logit layers start from random weights)")
    # rebuilding a trained model to load its checkpoint into reads no weights (the file may be gone)
    path.unlink()
    assert build_model("torchvision/resnet18", 4, load_weights=False, weights=str(path)) is not None


def test_weights_by_torchvision_name_set_weights_and_normalisation(monkeypatch):
    """What torchvision would download is replaced by a local state dict (tests have no network)."""
    torch.manual_seed(2)
    source = torchvision.models.squeezenet1_1().state_dict()
    monkeypatch.setattr(torchvision.models.WeightsEnum, "get_state_dict", lambda self, *a, **k: source)
    for weights in ("SqueezeNet1_1_Weights.IMAGENET1K_V1", "DEFAULT"):
        model = backbone("squeezenet1_1", weights=weights)
        conv = model.backbone.features[0]
        assert torch.equal(conv.weight, source["features.0.weight"])
        assert model.normalize.mean.flatten().tolist() == pytest.approx(IMAGENET_MEAN)
        assert loaded_weights(model).startswith("weights SqueezeNet1_1_Weights.IMAGENET1K_V1 (torchvision): "
                                                f"{len(model.backbone.state_dict())} of ")
    assert loaded_weights(backbone("squeezenet1_1")) is None


@pytest.mark.parametrize("weights, message", [
    ("IMAGENET9K_V9", "unknown weights 'IMAGENET9K_V9'; this architecture has: ResNet18_Weights.IMAGENET1K_V1"),
    ("ResNet50_Weights.IMAGENET1K_V1", "unknown weights 'ResNet50_Weights.IMAGENET1K_V1'"),
    ("no/such/file.pth", "weights file no/such/file.pth does not exist"),
])
def test_bad_weights_are_one_clear_line(weights, message):
    with pytest.raises(ConfigError, match="torchvision/resnet18: " + message.replace(".", r"\.")) as error:
        backbone("resnet18", weights=weights)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("options, message", [
    ({"feature_dim": "512"}, "feature_dim must be integers >= 1, got 4, '512'"),
    ({"freeze": "yes"}, "freeze must be one of none, backbone, got 'yes'"),
    ({"freeze_backbone": "yes"}, r"freeze_backbone \(the older spelling of freeze\) must be true or false"),
    ({"freeze_backbone": True, "freeze": "backbone"}, "given without freeze, got True"),
    ({"dropout_rate": 0.1}, "unexpected keyword argument 'dropout_rate'"),
])
def test_bad_options_are_one_clear_line(options, message):
    with pytest.raises(ConfigError, match=f"torchvision/resnet18: .*{message}"):
        backbone("resnet18", **options)


def test_a_file_for_another_model_is_refused_naming_it(tmp_path):
    other = tmp_path / "mobilenet.pth"
    torch.save(torchvision.models.mobilenet_v3_small().state_dict(), other)
    not_a_state_dict = tmp_path / "list.pth"
    torch.save([1, 2, 3], not_a_state_dict)
    with pytest.raises(ConfigError, match=f"weights file {other} does not fit this architecture"):
        backbone("resnet18", weights=str(other))
    with pytest.raises(ConfigError, match=f"weights file {not_a_state_dict} is not a state dict"):
        backbone("resnet18", weights=str(not_a_state_dict))


@pytest.mark.parametrize("name", ["torchvision/resnet19", "resnet50"])
def test_an_unknown_model_name_lists_close_names(name):
    with pytest.raises(ConfigError) as error:
        TrainConfig(model=name).validate()
    message = str(error.value)
    assert "\n" not in message and f"got {name!r}" in message
    assert "close: torchvision/resnet" in message  # the likely meant torchvision names, not all 80
    assert "torchvision/vit_h_14" not in message
    with pytest.raises(ConfigError, match="close: torchvision/resnet"):
        build_model(name, 3)


def test_every_torchvision_classification_model_is_registered():
    names = torchvision.models.list_models(module=torchvision.models)
    assert len(names) > 50 and all(f"torchvision/{name}" in MODELS for name in names)
    assert TrainConfig(model="torchvision/convnext_tiny").validate().model == "torchvision/convnext_tiny"


# One of every family: the classifier is found and F has the trunk's width. Built and run on the
# meta device (shapes only: no memory, no arithmetic), so even ViT-H costs little. RegNets cannot be
# built there (their builder computes widths from tensors); regnet_x_400mf is small enough on the CPU.
FAMILIES = ["alexnet", "convnext_tiny", "densenet121", "efficientnet_b0", "efficientnet_v2_s", "googlenet",
            "inception_v3", "maxvit_t", "mnasnet0_5", "mobilenet_v2", "resnext50_32x4d", "shufflenet_v2_x0_5",
            "swin_t", "swin_v2_t", "vgg11_bn", "vit_h_14", "wide_resnet50_2"]


@pytest.mark.parametrize("arch", FAMILIES + ["regnet_x_400mf"])
def test_every_family_gets_the_open_set_head(arch):
    device = torch.device("cpu" if arch.startswith("regnet") else "meta")
    size = 299 if arch == "inception_v3" else 224
    with device:
        model = backbone(arch, feature_dim=3, num_outputs=2).eval()
        # the trunk alone: autocast, which the head turns off, does not know the meta device
        trunk_output = model.backbone(model.normalize(torch.zeros(1, 3, size, size)))
    assert trunk_output.shape == (1, model.features.in_features)
    assert (model.features.out_features, model.logits.out_features) == (3, 2)
