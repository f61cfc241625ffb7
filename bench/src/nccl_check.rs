//! `bench nccl-check`: NCCL's sums on burn's cuda backend (the build's, fusion's where it has it),
//! run as one process of a torchrun-style launch (or alone: a world of one). Each check prints
//! one line:
//! - the sum of every rank's values, integers in f32 and bf16 (exact in any order), to the bit;
//! - rank 0's random values broadcast to every rank, to the bit; alone, the sum of one rank's
//!   random values, which must be those values;
//! - the all-reduce of `--elements` f32 values (PushT classic's flat gradients by default) timed:
//!   milliseconds, the bandwidth NCCL's tests call algorithm and bus bandwidth;
//! - `--train`: the tiny policy trained for four steps with the gradients summed by NCCL, its
//!   losses printed (every rank's must be the same; the trainer checks the weights agree at
//!   each checkpoint).
//!
//! `scripts/gpu-run.sh nccl` runs it alone and as two ranks on the one GPU.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

/// Arguments of `bench nccl-check`.
#[derive(Debug, Clone, Args)]
pub struct NcclCheckArgs {
    /// The CUDA device this process uses; its local rank where absent (`LOCAL_RANK`).
    #[arg(long)]
    pub cuda_device: Option<usize>,
    /// How many f32 values the timed all-reduce sums (PushT classic's flat gradients: 262.7 M).
    #[arg(long, default_value_t = 262_709_026)]
    pub elements: usize,
    /// Timed all-reduces, after two untimed.
    #[arg(long, default_value_t = 10)]
    pub repeats: usize,
    /// Also train the tiny policy for four steps over a small dataset written under `work`.
    #[arg(long)]
    pub train: bool,
    /// Where `--train` writes its dataset (one per rank) and its run.
    #[arg(long, default_value = "target/bench/nccl-check")]
    pub work: PathBuf,
}

/// Runs the checks; an error where one failed (the others still print).
#[cfg(feature = "cuda")]
pub fn run(args: &NcclCheckArgs) -> Result<()> {
    built::run(args)
}

/// Without the cuda backend: says how to build it.
#[cfg(not(feature = "cuda"))]
pub fn run(_: &NcclCheckArgs) -> Result<()> {
    anyhow::bail!("this bench has no cuda backend: build it with `--features cuda` (which has NCCL)")
}

#[cfg(feature = "cuda")]
mod built {
    use std::time::Instant;

    use anyhow::{Context, Result, bail, ensure};
    use burn::backend::Autodiff;
    use burn::prelude::*;
    use burn::tensor::{DType, Distribution, TensorPrimitive};
    use kernels::{Collective, CollectiveKernels, DeviceGroup};
    use serde_json::json;

    use super::NcclCheckArgs;

    /// burn's cuda backend as this build trains on it.
    type Cuda = burn::backend::Cuda<f32, i32>;

    pub(super) fn run(args: &NcclCheckArgs) -> Result<()> {
        let launch = trainer::parallel::launch()?;
        let processes = launch.processes();
        let (rank, size) = (processes.rank(), processes.count());
        let index = args.cuda_device.unwrap_or(processes.local_rank());
        let device = burn::backend::cuda::CudaDevice::new(index);
        println!("rank {rank} of {size} on cuda:{index}: {}", DeviceGroup::library().map_err(anyhow::Error::msg)?);
        let offer = match rank {
            0 => Some(DeviceGroup::new_id().map_err(anyhow::Error::msg)?),
            _ => None,
        };
        let id = processes.agree(0, offer)?.context("process 0 made no group")?;
        let started = Instant::now();
        let group = DeviceGroup::join(&id, rank, size, index).map_err(anyhow::Error::msg)?;
        println!("rank {rank}: joined in {:.2} s", started.elapsed().as_secs_f64());
        let mut failures = Vec::new();
        let mut check = |what: &str, outcome: Result<String>| match outcome {
            Ok(line) => println!("rank {rank}: {what}: {line}"),
            Err(e) => {
                println!("rank {rank}: FAILED {what}: {e:#}");
                failures.push(what.to_string());
            }
        };
        check("sum of integers, f32", exact_sum(&group, &device, DType::F32));
        check("sum of integers, bf16", exact_sum(&group, &device, DType::BF16));
        check("rank 0's values broadcast", broadcast(&group, &device));
        check("all-reduce timed", time_all_reduce(&group, &device, args.elements, args.repeats));
        drop(group);
        if args.train {
            check("the tiny policy trained, summed by NCCL", train(args, rank, &device));
        }
        ensure!(failures.is_empty(), "rank {rank}: checks failed: {}", failures.join(", "));
        Ok(())
    }

    /// `collective` of `tensor` over `group`'s ranks.
    fn call(group: &DeviceGroup, tensor: Tensor<Cuda, 1>, collective: Collective) -> Result<Tensor<Cuda, 1>> {
        let done = Cuda::group_collective(tensor.into_primitive().tensor(), group, collective)
            .context("this backend has no device group")?
            .map_err(anyhow::Error::msg)?;
        Ok(Tensor::from_primitive(TensorPrimitive::Float(done)))
    }

    fn sum(group: &DeviceGroup, tensor: Tensor<Cuda, 1>) -> Result<Tensor<Cuda, 1>> {
        call(group, tensor, Collective::AllReduceSum)
    }

    /// Rank `r` holds `r + 1 + (i mod 7)` at `i`: the sum is `n(n+1)/2 + n·(i mod 7)`, exact.
    fn exact_sum(group: &DeviceGroup, device: &burn::backend::cuda::CudaDevice, dtype: DType) -> Result<String> {
        let (rank, n, len) = (group.rank(), group.size(), 1 << 20);
        let values: Vec<f32> = (0..len).map(|i| (rank + 1 + i % 7) as f32).collect();
        let tensor = Tensor::<Cuda, 1>::from_data(TensorData::new(values, [len]).convert_dtype(dtype), device);
        let summed =
            sum(group, tensor)?.into_data().convert::<f32>().into_vec::<f32>().map_err(|e| anyhow::anyhow!("{e:?}"))?;
        let wrong = (0..len).filter(|&i| summed[i] != (n * (n + 1) / 2 + n * (i % 7)) as f32).count();
        ensure!(wrong == 0, "{wrong} of {len} sums differ from the exact sum");
        Ok(format!("{len} values over {n} ranks exact"))
    }

    /// Every rank draws its own values; after the broadcast every rank holds rank 0's, the same
    /// bits as rank 0 drew (alone: the sum of one rank is its values, to the bit).
    fn broadcast(group: &DeviceGroup, device: &burn::backend::cuda::CudaDevice) -> Result<String> {
        let len = 1 << 20;
        let draw = |seed: u64| {
            Cuda::seed(device, seed);
            Tensor::<Cuda, 1>::random([len], Distribution::Normal(0.0, 1.0), device)
        };
        let bits = |t: Tensor<Cuda, 1>| -> Result<Vec<u32>> {
            let values = t.into_data().into_vec::<f32>().map_err(|e| anyhow::anyhow!("{e:?}"))?;
            Ok(values.iter().map(|v| v.to_bits()).collect())
        };
        let rank_0s = bits(draw(0))?;
        let mine = draw(group.rank() as u64);
        let received = call(group, mine.clone(), Collective::Broadcast)?;
        ensure!(bits(received)? == rank_0s, "not rank 0's bits");
        if group.size() == 1 {
            ensure!(bits(sum(group, mine.clone())?)? == bits(mine)?, "a world of one's sum changed the values");
            return Ok(format!("{len} values to the bit; a world of one's sum is its values, to the bit"));
        }
        Ok(format!("{len} values to the bit"))
    }

    fn time_all_reduce(
        group: &DeviceGroup,
        device: &burn::backend::cuda::CudaDevice,
        elements: usize,
        repeats: usize,
    ) -> Result<String> {
        let mut tensor = Tensor::<Cuda, 1>::ones([elements], device);
        for _ in 0..2 {
            tensor = sum(group, tensor)?.div_scalar(group.size() as f64);
        }
        Cuda::sync(device)?;
        let started = Instant::now();
        for _ in 0..repeats {
            tensor = sum(group, tensor)?;
        }
        Cuda::sync(device)?;
        let seconds = started.elapsed().as_secs_f64() / repeats.max(1) as f64;
        let n = group.size() as f64;
        let bytes = elements as f64 * 4.0;
        let algorithm = bytes / seconds / 1e9;
        Ok(format!(
            "{elements} f32 ({:.2} GB) in {:.2} ms: algorithm bandwidth {algorithm:.1} GB/s, bus {:.1} GB/s",
            bytes / 1e9,
            seconds * 1e3,
            algorithm * 2.0 * (n - 1.0) / n
        ))
    }

    fn train(args: &NcclCheckArgs, rank: usize, device: &burn::backend::cuda::CudaDevice) -> Result<String> {
        let root = crate::gpu_check::small_dataset(&args.work.join(format!("rank-{rank}")))?;
        let config = crate::gpu_check::tiny(&root, &args.work.join("run"), 4, json!({"save_freq": 2}))?;
        let outcome = trainer::train::<Autodiff<Cuda>>(&config, None, device.clone(), |_| {})?;
        if outcome.steps != 4 {
            bail!("the run ended at step {}", outcome.steps);
        }
        let losses: Vec<String> = outcome.losses.iter().map(|(step, loss)| format!("{step}:{loss:.6}")).collect();
        Ok(format!("losses {}", losses.join(" ")))
    }
}
