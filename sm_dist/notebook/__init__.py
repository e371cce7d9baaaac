"""What a notebook shows of sm_dist's objects: the live view, metrics and their plots (core).

Both backends, the plan and the estimate render through these modules, so a notebook shows the
same information as the terminal from the same code: `sm_dist.markup` turns the text renderings
into escaped HTML tables (it sits below the contract, whose checkpoint listing uses it), `live` is
the one display a running job updates in place, `metrics` reads a job's logged metrics into a
table and draws them, and `plot` holds the drawing itself (new axes, saving, labels that do not
overlap). Standard library only; IPython and matplotlib are imported inside the functions that use
them, and only there.
"""
