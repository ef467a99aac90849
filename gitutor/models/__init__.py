"""Models of the reproduced papers."""
from gitutor.models.batchnorm import calibrate_batchnorm
from gitutor.models.gap_cnn import GapCNN
from gitutor.models.init import init_uniform_
from gitutor.models.lenet import LeNet
from gitutor.models.resnet import resnet18, resnet34
from gitutor.models.resnet20 import resnet20
from gitutor.models.fcn import FCN


__all__ = ["GapCNN", "LeNet", "calibrate_batchnorm", "init_uniform_", "resnet18", "resnet20", "resnet34", "FCN"]
