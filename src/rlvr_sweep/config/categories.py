"""The values of the pairs ledger's `category`: how each pair was made.

`CATEGORIES` by the samplers (`rollout.samplers`), `CF_CATEGORIES` by the counterfactual fork
(`rollout.cf_fork`); `verify.ledgers` checks every stored pair against them. Here, below the rollout
stage, so that a reader of the ledgers needs no torch.
"""

CATEGORIES = ("flat", "flat_warmup", "causal_non_eos", "terminal_dup", "tau_zero",
              "midpoint_fallback", "early_eos_gt104")
CF_CATEGORIES = ("cf_first_gap", "cf_min_margin", "cf_no_fork")
