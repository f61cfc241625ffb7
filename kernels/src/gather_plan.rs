//! How the GPU backends' gather (`cube/gather.rs`) cuts the gradients into launches, from their
//! element counts and dtypes alone: plain arithmetic, tested without a device.

use std::ops::Range;

use burn::tensor::DType;

/// `parts` consecutive indices cut into as few runs as allow at most `most` (at least 1) each,
/// their lengths within one of each other, the longer first (212 at 64: four of 53, where 64,
/// 64, 64 and 20 would leave a short last launch to compile a kernel of its own).
pub(crate) fn even_runs(parts: usize, most: usize) -> Vec<Range<usize>> {
    let count = parts.div_ceil(most.max(1));
    let (base, extra) = (parts / count.max(1), parts % count.max(1));
    let mut first = 0;
    (0..count)
        .map(|k| {
            let run = first..first + base + usize::from(k < extra);
            first = run.end;
            run
        })
        .collect()
}

/// One launch of a gather: its parts (indices), those of `dtypes[0]` before `split`, of
/// `dtypes[1]` after (the same dtype where the launch reads one), and its longest part's
/// element count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GatherLaunch {
    pub dtypes: [DType; 2],
    pub parts: Vec<usize>,
    pub split: usize,
    pub longest: usize,
}

/// The launches of a gather of parts of these element counts and dtypes, at most `most` parts a
/// launch: the parts with elements (a buffer of no bytes cannot be bound), f32's first, then
/// each other dtype's as they come, cut into [`even_runs`]; a launch reads two dtypes at most (a
/// run across a third is cut there: no step of ours has three). It depends on the sizes alone,
/// not on the parts' layouts, so that what a gather leaves can be told ahead.
pub(crate) fn gather_plan(parts: &[(usize, DType)], most: usize) -> Vec<GatherLaunch> {
    let mut dtypes: Vec<DType> = vec![DType::F32];
    for &(_, dtype) in parts {
        if !dtypes.contains(&dtype) {
            dtypes.push(dtype);
        }
    }
    let dtype_of = |k: &usize| parts[*k].1;
    let mut order: Vec<usize> = (0..parts.len()).filter(|&k| parts[k].0 > 0).collect();
    order.sort_by_key(|k| dtypes.iter().position(|&d| d == dtype_of(k)));
    let mut plan = Vec::new();
    for run in even_runs(order.len(), most) {
        let mut rest = &order[run];
        while let Some(first) = rest.first() {
            let split = rest.iter().take_while(|k| dtype_of(k) == dtype_of(first)).count();
            let second = rest.get(split).map_or(dtype_of(first), dtype_of);
            let end = split + rest[split..].iter().take_while(|k| dtype_of(k) == second).count();
            let (launch, tail) = rest.split_at(end);
            let longest = launch.iter().map(|&k| parts[k].0).max().unwrap_or(0);
            plan.push(GatherLaunch { dtypes: [dtype_of(first), second], parts: launch.to_vec(), split, longest });
            rest = tail;
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs cover every index once and in order, none longer than allowed, their lengths within
    /// one of each other (the longer first), as few as the bound allows.
    #[test]
    fn even_runs_cover_every_part_in_as_few_nearly_equal_runs_as_allowed() {
        for parts in 0..300 {
            for most in 1..80 {
                let runs = even_runs(parts, most);
                let case = format!("{parts} parts, at most {most} a run: {runs:?}");
                assert_eq!(runs.len(), parts.div_ceil(most), "{case}");
                let covered: Vec<usize> = runs.iter().flat_map(Clone::clone).collect();
                assert_eq!(covered, (0..parts).collect::<Vec<_>>(), "{case}");
                let lens: Vec<usize> = runs.iter().map(ExactSizeIterator::len).collect();
                assert!(lens.iter().all(|&n| (1..=most).contains(&n)), "{case}");
                let (longest, shortest) = (lens.iter().max().unwrap_or(&0), lens.iter().min().unwrap_or(&0));
                assert!(longest - shortest <= 1, "{case}");
                assert!(lens.windows(2).all(|w| w[0] >= w[1]), "{case}");
            }
        }
        assert_eq!(even_runs(212, 64), [0..53, 53..106, 106..159, 159..212]);
        assert_eq!(even_runs(212, 71).iter().map(ExactSizeIterator::len).collect::<Vec<_>>(), [71, 71, 70]);
    }

    /// PushT's half-precision step: the norms' 90 f32 gradients (among the others, as the
    /// model visits them) and 122 bf16 ones in three launches of 71, 71 and 70, the middle one
    /// reading both dtypes; empty parts left out.
    #[test]
    fn a_mixed_precision_gather_shares_launches_between_two_dtypes() {
        let parts: Vec<(usize, DType)> = (0..213)
            .map(|k| match k {
                212 => (0, DType::BF16),
                k if k % 7 < 3 && k < 210 => (k + 1, DType::F32),
                k => (3 * k + 1, DType::BF16),
            })
            .collect();
        let f32_count = parts.iter().filter(|(n, d)| *n > 0 && *d == DType::F32).count();
        assert_eq!(f32_count, 90);
        let plan = gather_plan(&parts, 71);
        let lens: Vec<usize> = plan.iter().map(|l| l.parts.len()).collect();
        assert_eq!(lens, [71, 71, 70]);
        assert_eq!(plan[0].dtypes, [DType::F32, DType::F32]);
        assert_eq!(plan[1].dtypes, [DType::F32, DType::BF16]);
        assert_eq!(plan[1].split, 19);
        assert_eq!(plan[2].dtypes, [DType::BF16, DType::BF16]);
        assert_eq!(plan[2].split, 70);
        for launch in &plan {
            let (first, second) = launch.parts.split_at(launch.split);
            assert!(first.iter().all(|&k| parts[k].1 == launch.dtypes[0]), "{launch:?}");
            assert!(second.iter().all(|&k| parts[k].1 == launch.dtypes[1]), "{launch:?}");
            assert_eq!(launch.longest, launch.parts.iter().map(|&k| parts[k].0).max().unwrap());
        }
        let mut all: Vec<usize> = plan.iter().flat_map(|l| l.parts.clone()).collect();
        all.sort_unstable();
        assert_eq!(all, (0..212).collect::<Vec<_>>(), "every part with elements, once");
    }

    /// Three dtypes in one run: the first two share a launch, the third takes one of its own.
    #[test]
    fn a_run_across_three_dtypes_is_cut_at_the_third() {
        let parts = [(4, DType::F16), (5, DType::F32), (6, DType::BF16), (7, DType::F32)];
        let plan = gather_plan(&parts, 8);
        assert_eq!(
            plan,
            [
                GatherLaunch { dtypes: [DType::F32, DType::F16], parts: vec![1, 3, 0], split: 2, longest: 7 },
                GatherLaunch { dtypes: [DType::BF16, DType::BF16], parts: vec![2], split: 1, longest: 6 },
            ]
        );
        assert!(gather_plan(&[(0, DType::F32)], 8).is_empty(), "no launch for parts without elements");
    }
}
