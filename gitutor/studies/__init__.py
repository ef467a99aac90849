"""Chapter experiments built from the package's algorithms: the sweeps, trials and client rounds
that notebooks 01, 02, 06 and 07 run, kept here so the notebooks tell the story and call them.
Intervals and comparisons come from :mod:`gitutor.stats`."""
