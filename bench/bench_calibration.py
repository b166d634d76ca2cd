"""Calibration of the suite's intervals and tests by simulation (issue 11, section 6).

Synthetic data with known truth, i.i.d. and clustered, through the library's own
functions (``stats.bootstrap``, ``permutation.permutation_test``, the gate's cell
test), >= 1,000 seeded replicates per case:

1. coverage of the 95% intervals (item bootstrap vs cluster bootstrap) for accuracy,
   s_DIS, s_AMB, SF and the worst-slice rate;
2. size of the permutation test at no difference (the suite's stratified design vs a
   naive one that ignores the clustering);
3. the gate's fail rate at delta = 0 and delta = margin (0.02), modes harm and
   non_inferiority, template vs item resampling (alpha = 0.05);
4. the clustered accuracy test's error at the margin over other designs: 6, 10, 42
   templates, a stronger template x model interaction, accuracy near the ceiling
   (0.95) (the cell test alone: ``metrics.gate.accuracy_test``).

Sections 3 and 4 run 10 x the replicates (``--gate-replicates``): their figures sit
near 5%, where 1,000 replicates leave a Monte Carlo error of 0.7 points.

Design (fixed across replicates, outcomes redrawn):

- BBQ-like cell: 20 templates of 40-200 items (the Race_x_SES shape), 6 intersectional
  groups. Clustered: a template random effect u_t ~ N(0, TAU^2) on the logit scale of
  every outcome (TAU = 1.0: per-template accuracy ranging over roughly 0.25-0.85 for a
  0.6-accuracy model, the "strongly template-dependent" behaviour of the issue);
  i.i.d.: TAU = 0.
- generative-like grid: 80 prompt frames (4 families x 2 paraphrases x 10 occupations)
  x 4 slices = 320 prompts, each asked 10 times (2 decodings x 5 seeds) = 3,200 rows;
  clustered: a prompt random effect N(0, TAU^2) on the logit of the stereotype rate.

Truth = the superpopulation value (templates / prompts drawn afresh), by Gauss-Hermite
quadrature over the random effect.

Run: ``python bench/bench_calibration.py [--replicates 1000] [--gate-replicates N]
[--sections 1,2,3,4]``.
The load average is printed beside the figures (the lead reruns on an idle machine).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from numpy.polynomial.hermite_e import hermegauss

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fairness_tests.benchmarks.bbq.gate import bbq_gate_metrics  # noqa: E402
from fairness_tests.metrics.gate import (  # noqa: E402
    GateSetting,
    accuracy_test,
    decide,
    gate_table,
)
from fairness_tests.metrics.sum_stats import (  # noqa: E402
    accuracy_stat,
    amb_bias_stat,
    bias_stat,
    subgroup_fairness,
)
from fairness_tests.stats.bootstrap import bootstrap  # noqa: E402
from fairness_tests.stats.permutation import permutation_test  # noqa: E402

TAU = 1.0
N_BOOT = 2000
GATE_N_BOOT = 200       # section 3: an accuracy cell's verdict does not use the bootstrap
GATE_REPLICATES = None  # sections 3 and 4: --gate-replicates (default 10 x --replicates)
GH_X, GH_W = hermegauss(80)
GH_W = GH_W / GH_W.sum()


def expit(x):
    return 1.0 / (1.0 + np.exp(-x))


def logit(p):
    return np.log(p / (1 - p))


def E_expit(mu, tau):
    """E[expit(mu + tau Z)], Z ~ N(0, 1), by quadrature (exact to ~1e-12)."""
    mu = np.asarray(mu, dtype=float)
    return (expit(mu[..., None] + tau * GH_X) * GH_W).sum(axis=-1)


def solve_mu(target, tau):
    """mu with E[expit(mu + tau Z)] = target (bisection)."""
    lo, hi = -20.0, 20.0
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if E_expit(mid, tau) < target else (lo, mid)
    return (lo + hi) / 2


# ---------------------------------------------------------------- designs

def bbq_design(seed=0, n_templates=20, n_groups=6, dominant=0.0):
    """Template of each item (sizes 40-200 like Race_x_SES) and its group. With
    ``dominant`` > 0 each template draws that share of its items from one group of its
    own (groups unevenly spread over templates, as name lists are in BBQ)."""
    rng = np.random.default_rng(seed)
    sizes = rng.choice([40, 48, 72, 160, 200], size=n_templates)
    template = np.repeat(np.arange(n_templates), sizes)
    group = rng.integers(0, n_groups, size=len(template))
    if dominant:
        own = rng.integers(0, n_groups, size=n_templates)[template]
        group = np.where(rng.random(len(template)) < dominant, own, group)
    return template, group


def gen_design():
    frames = 4 * 2 * 10
    n_slices = 4
    prompt = np.arange(frames * n_slices)
    rows = np.repeat(prompt, 10)                     # 2 decodings x 5 seeds per prompt
    return rows, rows % n_slices, rows // n_slices   # prompt, slice, frame of each row


class Tally:
    def __init__(self):
        self.rows = []

    def add(self, section, case, metric, method, figure, value, **extra):
        self.rows.append(dict(section=section, case=case, metric=metric, method=method,
                              figure=figure, value=value, **extra))


def covers(est, truth):
    return est.ci_low <= truth <= est.ci_high


# ---------------------------------------------------------------- 1. coverage

def coverage(R, tally, log):
    template, group = bbq_design(seed=1)
    n = len(template)
    G = group.max() + 1
    onehot = np.eye(G)[group]
    prompt, slc, _ = gen_design()
    S = slc.max() + 1
    member = np.eye(S)[slc]
    worst_rates = np.array([0.05, 0.06, 0.08, 0.12])
    gamma = np.array([0.0, 0.0, 0.3, -0.3, 0.6, 0.0])           # group effects (SF > 0)
    for case, tau in (("iid", 0.0), ("clustered", TAU)):
        t0 = time.perf_counter()
        rng = np.random.default_rng(100 + int(tau * 10))
        mu_acc = solve_mu(0.6, tau)
        mu_nu, mu_b = logit(0.7), logit(0.6)
        acc_true = 0.6
        sdis_true = 2 * E_expit(mu_b, tau) - 1
        amb_acc = 0.5
        mu_amb = solve_mu(amb_acc, tau)
        samb_true = (1 - amb_acc) * (2 * E_expit(mu_b, tau) - 1)
        mu_fav = logit(0.4)
        p_g = E_expit(mu_fav + gamma, tau)
        share = onehot.mean(axis=0)
        sf_true = float(np.max(share * np.abs((share * p_g).sum() - p_g)))
        mu_s = np.array([solve_mu(r, tau) for r in worst_rates])
        ws_true = float(worst_rates.max())
        res = {k: {"item": [], "cluster": []} for k in
               ("accuracy", "s_dis", "s_amb", "sf", "worst_slice")}
        deffs = {k: [] for k in res}
        bc = {"sf": [], "worst_slice": []}
        raw = {"sf": [], "worst_slice": []}
        for _ in range(R):
            u = tau * rng.standard_normal(20)[template]
            w = tau * rng.standard_normal(20)[template]
            v = tau * rng.standard_normal(20)[template]
            correct = (rng.random(n) < expit(mu_acc + u)).astype(float)
            nu = (rng.random(n) < expit(mu_nu + v)).astype(float)
            biased = nu * (rng.random(n) < expit(mu_b + w))
            amb_correct = (rng.random(n) < expit(mu_amb + u)).astype(float)
            amb_nu = 1 - amb_correct
            amb_biased = amb_nu * (rng.random(n) < expit(mu_b + w))
            fav = (rng.random(n) < expit(mu_fav + gamma[group] + u)).astype(float)
            up = tau * rng.standard_normal(prompt.max() + 1)[prompt]
            stereo = (rng.random(len(prompt)) < expit(mu_s[slc] + up)).astype(float)
            cases = {
                "accuracy": (np.column_stack([correct, np.ones(n)]), accuracy_stat, acc_true,
                             template),
                "s_dis": (np.column_stack([biased, nu]), bias_stat, sdis_true, template),
                "s_amb": (np.column_stack([amb_correct, np.ones(n), amb_biased, amb_nu]),
                          amb_bias_stat, samb_true, template),
                "sf": (np.column_stack([onehot, fav[:, None] * onehot]),
                       lambda s: subgroup_fairness(s[:, :G], s[:, G:]), sf_true, template),
                "worst_slice": (np.column_stack([member * stereo[:, None], member]),
                                lambda s: np.max(s[:, :S] / s[:, S:], axis=1), ws_true, prompt),
            }
            for metric, (X, stat, truth, cl) in cases.items():
                e_item = bootstrap(X, stat, N_BOOT, 0)
                e_cl = bootstrap(X, stat, N_BOOT, 0, clusters=cl)
                res[metric]["item"].append((covers(e_item, truth), e_item.ci_high - e_item.ci_low))
                res[metric]["cluster"].append((covers(e_cl, truth), e_cl.ci_high - e_cl.ci_low))
                deffs[metric].append(e_cl.deff)
                if metric in bc:
                    bc[metric].append(e_cl.value_bc - truth)
                    raw[metric].append(e_cl.value - truth)
        truths = dict(accuracy=acc_true, s_dis=sdis_true, s_amb=samb_true, sf=sf_true,
                      worst_slice=ws_true)
        for metric, by in res.items():
            for method, vals in by.items():
                cov = np.mean([c for c, _ in vals])
                width = np.mean([wd for _, wd in vals])
                extra = dict(truth=truths[metric], width=width,
                             deff=float(np.nanmean(deffs[metric])))
                if metric in bc and method == "cluster":
                    extra.update(bias_raw=float(np.mean(raw[metric])),
                                 bias_bc=float(np.mean(bc[metric])))
                tally.add("coverage", case, metric, f"{method} bootstrap", "coverage", cov,
                          **extra)
        log(f"coverage {case}: {R} replicates in {time.perf_counter() - t0:.0f} s")


# ---------------------------------------------------------------- 2. permutation size

def permutation_size(R, tally, log, alpha=0.05):
    template, group = bbq_design(seed=2, dominant=0.6)
    n = len(template)
    prompt, slc, frame = gen_design()

    def sf_stat(Sums):           # (m, G, 2): [n_g, fav_g]
        return subgroup_fairness(Sums[:, :, 0], Sums[:, :, 1])

    def range_stat(Sums):        # (m, S, 2): [y_s, n_s]
        r = Sums[:, :, 0] / Sums[:, :, 1]
        return r.max(axis=1) - r.min(axis=1)

    def pos_stat(Sums):          # (m, 3 rotations, 4): [one-hot answer a, valid]
        counts = np.stack([sum(Sums[:, r, (p + r) % 3] for r in range(3)) for p in range(3)],
                          axis=1)
        return np.abs(counts / Sums[:, :, 3].sum(axis=1, keepdims=True) - 1 / 3).max(axis=1)

    rng = np.random.default_rng(7)
    mu = logit(0.4)
    n_items = 480
    rot = np.tile(np.arange(3), n_items)
    item = np.repeat(np.arange(n_items), 3)
    hits = {k: [] for k in ("sf/within templates", "sf/ignoring templates",
                            "disparity/prompts within frames", "disparity/rows, no strata",
                            "position_bias/rotations within items")}
    t0 = time.perf_counter()
    for r in range(R):
        u = TAU * rng.standard_normal(20)[template]
        fav = (rng.random(n) < expit(mu + u)).astype(float)          # no group effect
        X = np.column_stack([np.ones(n), fav])
        hits["sf/within templates"].append(
            permutation_test(X, group, sf_stat, strata=template, seed=0).p_value < alpha)
        hits["sf/ignoring templates"].append(
            permutation_test(X, group, sf_stat, seed=0).p_value < alpha)
        up = TAU * rng.standard_normal(prompt.max() + 1)[prompt]
        y = (rng.random(len(prompt)) < expit(logit(0.08) + up)).astype(float)   # no slice effect
        Xg = np.column_stack([y, np.ones_like(y)])
        hits["disparity/prompts within frames"].append(
            permutation_test(Xg, slc, range_stat, strata=frame, units=prompt, seed=0).p_value
            < alpha)
        hits["disparity/rows, no strata"].append(
            permutation_test(Xg, slc, range_stat, seed=0).p_value < alpha)
        # a model answering by content: an item-specific preferred option, whatever the
        # rotation, with probability 0.8 (else a random letter)
        pref = rng.integers(0, 3, n_items)[item]
        a = np.where(rng.random(3 * n_items) < 0.8, pref, rng.integers(0, 3, 3 * n_items))
        Xp = np.column_stack([np.eye(3)[a], np.ones(3 * n_items)])
        hits["position_bias/rotations within items"].append(
            permutation_test(Xp, rot, pos_stat, strata=item, seed=0).p_value < alpha)
        if r == 9:
            log(f"permutation: 10 replicates in {time.perf_counter() - t0:.1f} s")
    for k, v in hits.items():
        metric, method = k.split("/")
        tally.add("permutation", "clustered, no difference", metric, method,
                  f"size at alpha={alpha}", float(np.mean(v)))
    log(f"permutation: {R} replicates in {time.perf_counter() - t0:.0f} s")


# ---------------------------------------------------------------- report

def fmt(x, spec=".3f"):
    return "" if x is None or (isinstance(x, float) and np.isnan(x)) else format(x, spec)


def print_table(tally, R):
    print()
    print(f"calibration, {R} replicates per case ({GATE_REPLICATES or 10 * R} in sections 3 "
          f"and 4, whose gate tables take {GATE_N_BOOT} resamples), {N_BOOT} bootstrap "
          f"resamples, 2,000 permutations, TAU = {TAU}")
    head = ["section", "case", "metric", "method", "figure", "value", "truth", "mean width",
            "mean deff", "bias raw", "bias bc"]
    rows = [[r["section"], r["case"], r["metric"], r["method"], r["figure"],
             fmt(r["value"]), fmt(r.get("truth")), fmt(r.get("width")), fmt(r.get("deff"), ".2f"),
             fmt(r.get("bias_raw"), "+.4f"), fmt(r.get("bias_bc"), "+.4f")] for r in tally.rows]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows, strict=True)]

    def line(cells):
        return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    print(line(head))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print(line(r))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replicates", type=int, default=1000)
    ap.add_argument("--sections", default="1,2,3,4")
    ap.add_argument("--gate-replicates", type=int, default=None,
                    help="replicates of sections 3 and 4 (default 10 x --replicates)")
    args = ap.parse_args(argv)
    global GATE_REPLICATES
    GATE_REPLICATES = args.gate_replicates
    R = args.replicates
    t0 = time.perf_counter()

    def log(msg):
        print(f"[{time.perf_counter() - t0:6.0f} s, load {os.getloadavg()[0]:.2f}] {msg}",
              file=sys.stderr, flush=True)

    sections = {s.strip() for s in args.sections.split(",")}
    everything = Tally()
    for key, run in (("1", coverage), ("2", permutation_size), ("3", gate_error_rates),
                     ("4", gate_designs)):
        if key in sections:
            tally = Tally()
            run(R, tally, log)
            print_table(tally, R)          # each section as soon as it is done
            sys.stdout.flush()
            everything.rows += tally.rows
    if len(sections) > 1:
        print_table(everything, R)
    la = os.getloadavg()
    print(f"\nwall {time.perf_counter() - t0:.0f} s; load average {la[0]:.2f} {la[1]:.2f} "
          f"{la[2]:.2f} on {os.cpu_count()} CPUs")


def gate_error_rates(R, tally, log, margin=0.02, alpha=0.05, checked=1000):
    """Paired accuracy cell (20 templates, Race_x_SES shape): both models share the item
    difficulty e_i ~ N(0, 1.5^2) and the template effect u_t; the candidate also has a
    template x model interaction v_t ~ N(0, (TAU/2)^2) (an upgrade changes some
    templates more than others), so the paired difference is itself clustered. The
    true accuracy drop is delta (superpopulation, by quadrature).

    Each replicate's verdicts come from the gate's cell test
    (``metrics.gate.accuracy_test``, family of one: fail = p < alpha in harm mode, p >=
    alpha in non-inferiority mode). The first ``checked`` replicates also go through
    ``metrics.gate.gate_table`` + ``decide`` (harm mode, both resampling units; its
    bootstrap fills only the CI columns, GATE_N_BOOT resamples) and the bench counts any
    verdict that differs (0 expected). Replicates: ``--gate-replicates``, default
    10 x ``--replicates`` (Monte Carlo error 0.2 points at 5%)."""
    R = GATE_REPLICATES or 10 * R
    template, _ = bbq_design(seed=3)
    n = len(template)
    acc_metric = [m for m in bbq_gate_metrics() if m.name == "accuracy"]
    frame = pd.DataFrame({"dataset": "D", "context": "disambig", "example_id": np.arange(n),
                          "question_index": template})
    sigma_e = 1.5
    rng = np.random.default_rng(11)
    differ = 0
    for case, tau in (("iid", 0.0), ("clustered", TAU)):
        t0 = time.perf_counter()
        tau_v = tau / 2
        sd_b = np.sqrt(tau ** 2 + sigma_e ** 2)
        sd_c = np.sqrt(tau ** 2 + tau_v ** 2 + sigma_e ** 2)
        mu_b = solve_mu(0.7, sd_b)
        for delta in (0.0, margin):
            mu_c = solve_mu(0.7 - delta, sd_c)
            fails = {(mode, unit): [] for mode in ("harm", "non_inferiority")
                     for unit in ("template", "item")}
            for k in range(R):
                u = tau * rng.standard_normal(20)[template]
                v = tau_v * rng.standard_normal(20)[template]
                e = sigma_e * rng.standard_normal(n)
                yb = rng.random(n) < expit(mu_b + u + e)
                yc = rng.random(n) < expit(mu_c + u + v + e)
                for (mode, unit), out in fails.items():
                    p = accuracy_test(yb, yc, template if unit == "template" else None,
                                      margin, mode).p_value
                    out.append(p < alpha if mode == "harm" else p >= alpha)
                if k < checked:
                    b = frame.assign(correct=yb.astype(float))
                    c = frame.assign(correct=yc.astype(float))
                    for unit in ("template", "item"):
                        t = gate_table(b, c, ["dataset", "example_id"], ["dataset", "context"],
                                       acc_metric, lambda m, key: GateSetting("harm", margin),
                                       "question_index" if unit == "template" else None,
                                       ["question_index"], n_boot=GATE_N_BOOT, seed=0)
                        failed = decide(t, alpha)["verdict"].iloc[0] == "fail"
                        differ += failed != fails[("harm", unit)][-1]
            for (mode, unit), out in fails.items():
                right = ("should pass" if mode == "harm" or delta == 0 else "should fail")
                tally.add("gate", case, f"accuracy, delta={delta:g}", f"{mode}, {unit} resampling",
                          f"fail rate ({right})", float(np.mean(out)))
        log(f"gate {case}: {R} replicates x 2 deltas in {time.perf_counter() - t0:.0f} s "
            f"(gate table on the first {min(checked, R)}: {differ} verdicts differ from the "
            "cell test)")
    tally.add("gate", "both", "accuracy", "gate table vs cell test",
              f"verdicts that differ (of {4 * min(checked, R)})", float(differ))


def gate_designs(R, tally, log, margin=0.02, alpha=0.05):
    """Section 4: the gate's accuracy cell test (``metrics.gate.accuracy_test``, templates
    resampled) at delta = margin, the section 3 replicates per design, the section 3 model with
    other numbers of templates (sizes drawn as there), interaction sd and accuracy."""
    R = GATE_REPLICATES or 10 * R
    sigma_e = 1.5
    rng = np.random.default_rng(29)
    designs = [(20, TAU / 2, 0.7), (6, TAU / 2, 0.7), (10, TAU / 2, 0.7), (42, TAU / 2, 0.7),
               (20, TAU, 0.7), (20, TAU / 2, 0.95)]
    for C, tau_v, acc in designs:
        t0 = time.perf_counter()
        template, _ = bbq_design(seed=3, n_templates=C)
        n = len(template)
        sd_b = np.sqrt(TAU ** 2 + sigma_e ** 2)
        sd_c = np.sqrt(TAU ** 2 + tau_v ** 2 + sigma_e ** 2)
        mu_b, mu_c = solve_mu(acc, sd_b), solve_mu(acc - margin, sd_c)
        fails = {"harm": [], "non_inferiority": []}
        for _ in range(R):
            u = TAU * rng.standard_normal(C)[template]
            v = tau_v * rng.standard_normal(C)[template]
            e = sigma_e * rng.standard_normal(n)
            yb = rng.random(n) < expit(mu_b + u + e)
            yc = rng.random(n) < expit(mu_c + u + v + e)
            for mode, out in fails.items():
                p = accuracy_test(yb, yc, template, margin, mode).p_value
                out.append(p < alpha)     # harm: a false fail; NI: a false pass
        case = f"{C} templates, interaction sd {tau_v:g}, accuracy {acc:g}"
        tally.add("gate designs", case, "accuracy, delta=margin", "harm, template resampling",
                  "fail rate (should pass)", float(np.mean(fails["harm"])))
        tally.add("gate designs", case, "accuracy, delta=margin",
                  "non_inferiority, template resampling", "pass rate (should fail)",
                  float(np.mean(fails["non_inferiority"])))
        log(f"gate design {case}: {R} replicates in {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
