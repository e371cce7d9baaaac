"""The facade: `sm_dist.plan(...)` and `sm_dist.fit(...)` (api) and the `sm-dist fit` command (cli).

It makes the plan (`sm_dist.planning`) and hands it to a backend: the cloud one (`sm_dist.cloud`)
or, with `local=True`, the local one (`sm_dist.local`). Only this package imports both backends.
"""
