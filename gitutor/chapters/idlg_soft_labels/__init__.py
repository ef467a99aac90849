"""Chapter 02, ``notebooks/02_idlg_soft_labels``: the iDLG sign rule and λ recovery of soft labels (Wang, Liang & He, ICLR 2024).

- :mod:`.profile`: settings
- :mod:`.trials`: images, labelled samples, the true λ, local minima
- :mod:`.experiments`: Tables 2, 5, 6 and Fig. 1
- :mod:`.matching`: Table 3 (gradient matching with each label)
- :mod:`.imagenet`: Table 1's ImageNet column on the ImageNet-trained EfficientNet-Lite0
- :mod:`.report`: tables and the paper-vs-run rows
- :mod:`.figures`: Fig. 1, Table 6's and Table 3's reconstructions
"""
