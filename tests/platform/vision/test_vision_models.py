import subprocess
import sys

import pytest
import torch

from sampan.errors import CheckpointError
from sampan.vision import models


def test_lenet_matches_paddle_layout_and_shapes():
    net = models.LeNet()
    assert net(torch.zeros(3, 1, 28, 28)).shape == (3, 10)
    # paddle.vision.models.LeNet: 61,610 parameters (its model.summary()) for 10 classes
    assert sum(p.numel() for p in net.parameters()) == 61610
    assert [type(m).__name__ for m in net.features] == ["Conv2d", "ReLU", "MaxPool2d", "Conv2d", "ReLU", "MaxPool2d"]
    assert models.LeNet(num_classes=4, in_channels=3)(torch.zeros(2, 3, 28, 28)).shape == (2, 4)
    assert models.LeNet(num_classes=0)(torch.zeros(1, 1, 28, 28)).shape == (1, 16, 5, 5)


def test_lenet_learns_digits_quickly():
    from sampan.data import load_dataset

    torch.manual_seed(0)
    train = load_dataset("digits", "train", size=28)
    net = models.LeNet()
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    images, labels = train.images, train.labels
    for _ in range(2):
        for i in range(0, len(labels), 32):
            loss = torch.nn.functional.cross_entropy(net(images[i : i + 32]), labels[i : i + 32])
            opt.zero_grad()
            loss.backward()
            opt.step()
    test = load_dataset("digits", "test", size=28)
    with torch.no_grad():
        accuracy = (net(test.images).argmax(1) == test.labels).float().mean().item()
    assert accuracy > 0.8


@pytest.mark.parametrize("builder", [models.resnet18, models.mobilenet_v3_small])
@pytest.mark.parametrize("in_channels", [1, 3])
def test_torchvision_models_take_num_classes_and_in_channels(builder, in_channels):
    net = builder(num_classes=7, in_channels=in_channels)
    assert net(torch.zeros(2, in_channels, 32, 32)).shape == (2, 7)


def test_resnet50_head_size():
    assert models.resnet50(num_classes=3).fc.out_features == 3


def test_bad_arguments_name_the_argument():
    with pytest.raises(ValueError, match=r"`num_classes` to be an int \(0 or less.*Received: num_classes=True"):
        models.resnet18(num_classes=True)
    with pytest.raises(ValueError, match=r"Expected `with_pool` to be True or False. Received: with_pool='no'"):
        models.resnet18(with_pool="no")
    with pytest.raises(ValueError, match=r"`in_channels`.*Received: in_channels=-1"):
        models.LeNet(in_channels=-1)
    with pytest.raises(ValueError, match=r"`name`.*zoo name.*Received: name='../evil'"):
        models.zoo_path("../evil")


def test_pretrained_without_zoo_weights_says_how_to_make_them(data_home):
    with pytest.raises(FileNotFoundError) as err:
        models.resnet18(pretrained=True, num_classes=10)
    message = str(err.value)
    assert str(data_home / "zoo" / "resnet18.pt") in message
    assert "save_to_zoo(net, 'resnet18')" in message and "never downloads" in message


def test_zoo_round_trip_restores_the_weights(data_home):
    torch.manual_seed(1)
    net = models.resnet18(num_classes=10, in_channels=1).eval()
    path = models.save_to_zoo(net, "resnet18")
    assert path == data_home / "zoo" / "resnet18.pt" == models.zoo_path("resnet18")
    assert [p.name for p in path.parent.iterdir()] == ["resnet18.pt"]  # no temporary left behind
    loaded = models.resnet18(pretrained=True, num_classes=10, in_channels=1).eval()
    x = torch.randn(2, 1, 32, 32)
    with torch.no_grad():
        assert torch.equal(loaded(x), net(x))


def test_pretrained_by_zoo_name_with_a_new_head_keeps_the_backbone():
    torch.manual_seed(2)
    source = models.resnet18(num_classes=10)
    models.save_to_zoo(source, "resnet18-shapes")
    with pytest.warns(UserWarning, match="freshly initialised") as seen:
        net = models.resnet18(pretrained="resnet18-shapes", num_classes=4)
    with pytest.warns(UserWarning, match="freshly initialised") as direct:
        models.load_from_zoo(models.resnet18(num_classes=4), "resnet18-shapes", head=("fc",))
    # the warning names the learner's line, whichever way the weights were loaded (not Sampan's, not IPython's)
    assert seen[0].filename == direct[0].filename == __file__
    assert torch.equal(net.conv1.weight, source.conv1.weight)
    assert torch.equal(net.layer4[1].conv2.weight, source.layer4[1].conv2.weight)
    assert net.fc.out_features == 4


def test_weights_of_another_architecture_raise_checkpoint_error():
    models.save_to_zoo(models.LeNet(), "resnet18")
    with pytest.raises(CheckpointError, match="do not fit this network") as err:
        models.resnet18(pretrained=True)
    assert "conv1.weight" in err.value.missing


def test_save_to_zoo_accepts_an_object_with_a_network():
    class Wrapper:
        network = models.LeNet()

    path = models.save_to_zoo(Wrapper(), "lenet-digits")
    state = torch.load(path, weights_only=True)
    assert torch.equal(state["fc.2.bias"], Wrapper.network.fc[2].bias)
    with pytest.raises(TypeError, match="`net` to be a torch.nn.Module"):
        models.save_to_zoo(object(), "x")


def test_import_sampan_vision_does_not_import_torchvision():
    code = "import sys, sampan.vision; print('torchvision' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("builder, channels", [(models.resnet18, 512), (models.mobilenet_v3_small, 576)])
def test_num_classes_0_and_with_pool_false_give_features_like_paddle(builder, channels):
    """Audit: resnet18(num_classes=0) was refused and with_pool= was a raw TypeError; Paddle has both."""
    torch.manual_seed(0)
    x = torch.randn(2, 3, 64, 64)
    pooled, grid = builder(num_classes=0).eval(), builder(num_classes=-1, with_pool=False).eval()
    with torch.no_grad():
        assert pooled(x).shape == (2, channels, 1, 1)  # Paddle: the pooled map, not flattened
        assert grid(x).shape == (2, channels, 2, 2)  # Paddle: the map before the pool
    head = "fc." if builder is models.resnet18 else "classifier."
    assert not any(k.startswith(head) for k in pooled.state_dict())  # no classifier at all, as in Paddle
    assert sorted(builder(num_classes=5, with_pool=False).state_dict()) == sorted(builder(num_classes=5).state_dict())
    with torch.no_grad():  # with a classifier and no pool the map must be 1x1, as in Paddle
        assert builder(num_classes=5, with_pool=False).eval()(torch.zeros(1, 3, 32, 32)).shape == (1, 5)
    with pytest.raises(ValueError, match=r"`with_pool` to be True when the feature map is larger than 1x1"):
        builder(num_classes=5, with_pool=False)(x)
    assert type(builder(num_classes=5)).__name__ in ("ResNet", "MobileNetV3")  # the default: torchvision's own


@pytest.mark.parametrize("builder, arch", [(models.resnet18, "resnet18"), (models.mobilenet_v3_small, "mb")])
def test_zoo_weights_load_into_a_network_without_its_classifier(builder, arch, data_home):
    torch.manual_seed(3)
    full = builder(num_classes=4, in_channels=1).eval()
    models.save_to_zoo(full, arch)
    features = builder(arch, num_classes=0, in_channels=1, with_pool=False).eval()  # the saved head is skipped
    x = torch.randn(2, 1, 64, 64)
    with torch.no_grad():
        body = full.features(x) if arch == "mb" else full.layer4(full.layer3(full.layer2(full.layer1(
            full.maxpool(full.relu(full.bn1(full.conv1(x))))))))
        assert torch.equal(features(x), body)
