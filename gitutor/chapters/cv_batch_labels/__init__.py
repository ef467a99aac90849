"""Chapter 03, ``notebooks/03_cv_batch_labels``: Stage I of Ye et al. (AAAI 2024), batch label counts.

- :mod:`.profile`: settings
- :mod:`.experiments`: features, the count search against Eq. 6 and the baselines, sweeps
- :mod:`.substitute`: the random-vs-trained comparison
- :mod:`.report`: tables, sentences and rows
- :mod:`.substitute_report`: that comparison's table, figure and rows
- :mod:`.imagenet`: the headline, Stage I on the ImageNet-trained EfficientNet-Lite0 with true labels
- :mod:`.imagenet_report`: its table, figures, sentences and rows
- :mod:`.figures`: every figure
"""
