"""Models of the reproduced papers, and helpers that look inside a model."""

from gitutor.models.batchnorm import calibrate_batchnorm
from gitutor.models.buffers import preserved_buffers
from gitutor.models.cifar_resnet18 import CifarResNet18, cifar_resnet18
from gitutor.models.gap_cnn import GapCNN
from gitutor.models.init import init_uniform_
from gitutor.models.introspect import fc_input_features, fc_weight_index, last_linear
from gitutor.models.lenet import LeNet
from gitutor.models.resnet import imagenet_resnet34, resnet18, resnet34
from gitutor.models.resnet20 import resnet20
from gitutor.models.fcn import FCN
from gitutor.models.face_embedding import (
    FACE_MATCH_THRESHOLD,
    face_distance,
    face_embedding,
)
from gitutor.models.lpips_net import lpips_network
from gitutor.models.pretrained import (
    PRETRAINED,
    Normalized,
    imagenet_categories,
    pretrained,
)


__all__ = [
    "CifarResNet18",
    "GapCNN",
    "cifar_resnet18",
    "LeNet",
    "calibrate_batchnorm",
    "fc_input_features",
    "fc_weight_index",
    "imagenet_resnet34",
    "init_uniform_",
    "last_linear",
    "preserved_buffers",
    "resnet18",
    "resnet20",
    "resnet34",
    "FCN",
    "Normalized",
    "PRETRAINED",
    "imagenet_categories",
    "lpips_network",
    "pretrained",
    "FACE_MATCH_THRESHOLD",
    "face_distance",
    "face_embedding",
]
