"""Chapter experiments built from the package's algorithms: the sweeps, trials, client rounds,
figures and paper-vs-run rows that the chapters run (one module per chapter concern, e.g.
``dlg_sweeps``, ``cv_batch_labels``, ``stepwise_gradinversion``, ``admm_rounds`` and their
``*_report``/``*_figures`` companions), kept here so the notebooks tell the story and call them.
Intervals and comparisons come from :mod:`gitutor.stats`."""
