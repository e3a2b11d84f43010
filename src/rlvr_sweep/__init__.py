"""rlvr_sweep: run, compare and trust many GRPO variants ("arms") across seeds.

The subpackages are the pipeline's stages; each imports only the stages above it in this list:

    config      typed configuration (one dataclass per Hydra group)
    plugins     a researcher's own code: imported, digested into the identity, its errors named
    data        problems, gold answers, splits, the toy task, the prompt template
    policy      model + tokenizer loading, the shipped tiny checkpoint
    rollout     decoding engine and samplers (flat, stopped tree, root restart, midpoint)
    reward      verifier and derivation gate
    credit      GRPO and tree advantages
    update      loss and optimizer step
    store       run folders and parquet tables
    evaluation  read-outs of a policy on benchmarks
    analysis    the paper's tables, bootstrap CIs, FLOP proxies, voting and figures (reads tables only)
    run         one run: read out, train, read out
    sweep       command line, pre-launch checks, sweep summary
    verify      recomputation of stored results (reads tables, never the trainer)
    extend      the one module a plugin imports: every registry, parameter rules, the records it hands over
"""

__version__ = "0.1.0"
