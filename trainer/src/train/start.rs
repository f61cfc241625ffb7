//! Where a run starts: fresh (seeded weights, the datasets' statistics, step 0) or from a
//! checkpoint (its weights, optimiser state, EMA, loss scale, statistics and sampler position),
//! after checking that the checkpoint's run is the one this run would continue.

use std::path::Path;

use burn::module::{AutodiffModule, Module};
use kernels::Kernels;
use loader::SamplerState;
use transforms::Normalizer;

use super::data::TrainData;
use super::outcome::Progress;
use crate::checkpoint::{self, TrainingState};
use crate::ema::Ema;
use crate::error::{Error, Result};
use crate::inputs::InputPipeline;
use crate::lerobot::{TorchHub, backbone_weights_file, check_features, load_pretrained_policy, load_resnet18};
use crate::model::{DiffusionModel, materialize, with_seeded_generator};
use crate::policy_config::{DiffusionConfig, PolicyFeatures};
use crate::precision::LossScaler;
use crate::step::{StepMode, StepRunner, TrainingBackend};
use crate::train_config::TrainConfig;

/// The model for `features`, seeded so that two runs start from the same weights, with the
/// pretrained backbone when the configuration names one.
pub fn init_model<B: Kernels>(
    config: &DiffusionConfig,
    features: &PolicyFeatures,
    seed: u64,
    device: &B::Device,
) -> Result<DiffusionModel<B>> {
    // burn initialises parameters lazily, from its one generator per process as it is then:
    // draw them all now, in a fixed order, with nothing else drawing in between.
    let mut model = with_seeded_generator::<B, _>(device, seed, || {
        let model = DiffusionModel::new(config, features, device);
        materialize(&model);
        model
    });
    if let Some(weights) = &config.pretrained_backbone_weights {
        let mut on_download =
            |url: &str, path: &Path| tracing::info!("downloading {weights} from {url} to {}", path.display());
        let path = backbone_weights_file(weights, &TorchHub::from_env(), &mut on_download)?;
        model.rgb_encoder =
            model.rgb_encoder.into_iter().map(|e| load_resnet18(e, &path, device)).collect::<Result<_>>()?;
    }
    Ok(model)
}

/// `config` with its backbone weights' name (if any) replaced by their file, downloaded first
/// when missing; each said on `on_progress`.
fn locate_backbone_weights(
    config: &DiffusionConfig,
    on_progress: &mut dyn FnMut(Progress<'_>),
) -> Result<DiffusionConfig> {
    let Some(weights) = &config.pretrained_backbone_weights else {
        return Ok(config.clone());
    };
    let mut on_download = |url: &str, path: &Path| {
        on_progress(Progress::Line(&format!("downloading {weights} from {url} to {}", path.display())));
    };
    let path = backbone_weights_file(weights, &TorchHub::from_env(), &mut on_download)?;
    on_progress(Progress::Line(&format!("pretrained backbone: {weights} ({})", path.display())));
    Ok(DiffusionConfig { pretrained_backbone_weights: Some(path.to_string_lossy().into_owned()), ..config.clone() })
}

/// Where a run starts: the step runner, the training state and the normalisation statistics.
pub(super) struct Start<B: TrainingBackend> {
    /// The model and optimiser, ready for the next step.
    pub runner: StepRunner<B>,
    /// The step, sampler position and what else the run continues from.
    pub state: TrainingState,
    /// The statistics the inputs are normalised with (and checkpoints keep).
    pub normalizer: Normalizer,
}

impl<B: TrainingBackend> Start<B> {
    /// A run of `world_size` replicas on `device`: fresh, or continued from the checkpoint that
    /// `resume` designates (an output folder or a checkpoint folder).
    pub fn new(
        config: &TrainConfig,
        run: &TrainData,
        resume: Option<&Path>,
        device: B::Device,
        world_size: usize,
        on_progress: &mut dyn FnMut(Progress<'_>),
    ) -> Result<Self> {
        let fresh = fresh_state(config, run, world_size)?;
        match resume {
            None => Self::fresh(config, run, fresh, device, on_progress),
            Some(path) => Self::resumed(config, run, &fresh, path, device, on_progress),
        }
    }

    /// A new run: seeded weights (the backbone's pretrained ones, if named), or a pretrained
    /// policy's (`policy.path`); the dataset's statistics, step 0.
    fn fresh(
        config: &TrainConfig,
        run: &TrainData,
        state: TrainingState,
        device: B::Device,
        on_progress: &mut dyn FnMut(Progress<'_>),
    ) -> Result<Self> {
        let model = match &config.policy.path {
            None => {
                let policy = locate_backbone_weights(&config.policy.config, on_progress)?;
                init_model::<B>(&policy, &run.features, config.seed, &device)?
            }
            Some(dir) => {
                check_features(dir, &run.features)?;
                // Every weight comes from the pretrained policy: torchvision's are not needed.
                let policy = DiffusionConfig { pretrained_backbone_weights: None, ..config.policy.config.clone() };
                let model = init_model::<B>(&policy, &run.features, config.seed, &device)?;
                let model = load_pretrained_policy(model, &policy, dir)?;
                on_progress(Progress::Line(&format!("fine-tuning the pretrained policy in {}", dir.display())));
                model
            }
        };
        let normalizer = run.normalizer(config)?;
        let ema = config.ema.enable.then(|| Ema::new(&model.valid(), config.ema.clone()));
        let runner = with_ema(step_runner(config, run, model, &normalizer, device, on_progress)?, ema)?;
        Ok(Self { runner, state, normalizer })
    }

    /// A run continued from the checkpoint at `path`, once [`check_continues`] has found it to
    /// be this run's (`fresh` is how this run would start).
    fn resumed(
        config: &TrainConfig,
        run: &TrainData,
        fresh: &TrainingState,
        path: &Path,
        device: B::Device,
        on_progress: &mut dyn FnMut(Progress<'_>),
    ) -> Result<Self> {
        let dir = checkpoint::resolve(path)?;
        let state: TrainingState = checkpoint::read_json(&dir, "training_state.json")?;
        check_continues(&state, fresh, run)?;
        let normalizer: Normalizer = checkpoint::read_json(&dir, "normalizer.json")?;
        let policy = &config.policy.config;
        let model = DiffusionModel::<B>::skeleton(policy, &run.features, &device)
            .load_file(dir.join("model"), &checkpoint::recorder(), &device)
            .map_err(|e| Error::checkpoint(&dir, format!("model: {e}")))?;
        let ema = match config.ema.enable {
            false => None,
            true => Some(load_ema(config, run, &dir, &model, &device, on_progress)?),
        };
        let mut runner = with_ema(step_runner(config, run, model, &normalizer, device.clone(), on_progress)?, ema)?;
        if let Some(scale) = state.loss_scale {
            runner = runner.with_loss_scaler(LossScaler::from_state(scale));
        }
        let optim = checkpoint::load_record::<B::InnerBackend, _>(&dir, "optimizer", &device).map_err(|e| match e {
            Error::Checkpoint { path, message } => Error::Checkpoint {
                path,
                message: format!(
                    "{message} (checkpoints written before the flat optimiser keep burn's per-parameter \
                     Adam state, which this version cannot resume: start a new run)"
                ),
            },
            other => other,
        })?;
        let runner = runner.with_optimizer(optim).map_err(|e| Error::checkpoint(&dir, e))?;
        on_progress(Progress::Line(&format!("resuming from {} at step {}", dir.display(), state.step)));
        Ok(Self { runner, state, normalizer })
    }
}

/// The training state of this run before its first step: what a checkpoint it writes will
/// record of the seed, datasets, weights, replicas and order.
fn fresh_state(config: &TrainConfig, run: &TrainData, world_size: usize) -> Result<TrainingState> {
    Ok(TrainingState {
        step: 0,
        sampler: SamplerState::default(),
        seed: config.seed,
        samples: 0,
        loss_scale: None,
        datasets: run.fingerprints()?,
        weights: config.dataset.weights.clone(),
        world_size,
        sampler_order: config.sampler,
    })
}

/// Refuses a checkpoint whose run this one would not continue: another seed, or a sampler
/// position that would mean other samples here (other datasets, device count, dataset weights
/// or order). `fresh` is how this run would start.
fn check_continues(saved: &TrainingState, fresh: &TrainingState, run: &TrainData) -> Result<()> {
    if saved.seed != fresh.seed {
        return Err(Error::Config(format!(
            "the checkpoint was trained with seed {}, this run has {}",
            saved.seed, fresh.seed
        )));
    }
    // The sampler's position means something only over the same datasets, weighted the same way
    // (checkpoints from before several datasets record none).
    if !saved.datasets.is_empty() && saved.datasets != fresh.datasets {
        let names = (0..fresh.datasets.len()).map(|i| run.datasets.name(i)).collect::<Vec<_>>().join(", ");
        return Err(Error::Config(format!(
            "the checkpoint was trained on {} dataset(s) other than this run's {names} (another dataset, \
             or one changed since): its sampler position would mean other samples",
            saved.datasets.len()
        )));
    }
    // Each replica's sampler position is in its own shard of every epoch.
    if saved.world_size != fresh.world_size {
        return Err(Error::Config(format!(
            "the checkpoint was trained on {} device(s), this run has {}: its sampler position is one \
             shard's of {0} (resume on {0} devices)",
            saved.world_size, fresh.world_size
        )));
    }
    if !same_weights(saved.weights.as_deref(), fresh.weights.as_deref()) {
        return Err(Error::Config(format!(
            "the checkpoint was trained with dataset weights {:?}, this run has {:?}",
            saved.weights, fresh.weights
        )));
    }
    if !saved.sampler_order.same_order(&fresh.sampler_order) {
        return Err(Error::Config(format!(
            "the checkpoint was trained in the sampler order {:?}, this run asks for {:?}: its sampler \
             position would mean other samples",
            saved.sampler_order, fresh.sampler_order
        )));
    }
    Ok(())
}

/// Whether two sets of sampling weights are the same, up to the last bit a JSON round trip may
/// lose.
fn same_weights(a: Option<&[f64]>, b: Option<&[f64]>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() <= 1e-12 * x.abs().max(y.abs()))
        }
        _ => false,
    }
}

/// The EMA a resumed run continues: the checkpoint's, or (for a checkpoint without one) a new
/// one from its weights.
fn load_ema<B: TrainingBackend>(
    config: &TrainConfig,
    run: &TrainData,
    dir: &Path,
    model: &DiffusionModel<B>,
    device: &B::Device,
    on_progress: &mut dyn FnMut(Progress<'_>),
) -> Result<Ema<B::InnerBackend>> {
    if !dir.join("ema.mpk").exists() {
        on_progress(Progress::Line("the checkpoint has no EMA: starting one from its weights"));
        return Ok(Ema::new(&model.valid(), config.ema.clone()));
    }
    let average = DiffusionModel::<B::InnerBackend>::skeleton(&config.policy.config, &run.features, device)
        .load_file(dir.join("ema"), &checkpoint::recorder(), device)
        .map_err(|e| Error::checkpoint(dir, format!("ema: {e}")))?;
    Ok(Ema::new(&average, config.ema.clone()))
}

/// A step runner for `model`, set up as training sets it up from `config`: the input pipeline
/// (normalised by `normalizer`), precision and gradient accumulation, and the frame caches'
/// frames uploaded to the device where [`TrainData::settle_frames_on_device`], called first,
/// kept them there (otherwise they stay on the host). Training adds its EMA after. An error
/// where the device cannot compute in the precision, or the upload fails.
pub fn step_runner<B: TrainingBackend>(
    config: &TrainConfig,
    run: &TrainData,
    model: DiffusionModel<B>,
    normalizer: &Normalizer,
    device: B::Device,
    on_progress: &mut dyn FnMut(Progress<'_>),
) -> Result<StepRunner<B>> {
    let policy = &config.policy.config;
    let pipeline = InputPipeline::new(
        policy.clone(),
        run.features.clone(),
        normalizer.clone(),
        config.dataset.image_transforms.clone(),
    );
    let started = std::time::Instant::now();
    let frames = run.device_frames::<B>(&device)?;
    if let Some(frames) = &frames {
        B::sync(&device).map_err(|e| Error::Config(format!("uploading the frames: {e:?}")))?;
        on_progress(Progress::Line(&format!(
            "frames on the device: {:.2} GB uploaded in {:.1} s",
            frames.bytes() as f64 / 1e9,
            started.elapsed().as_secs_f64()
        )));
    }
    let mut runner = StepRunner::new(model, policy.clone(), pipeline, config.seed, config.steps, device)
        .with_precision(config.precision)?
        .with_grad_accum(config.grad_accum)
        .with_step_mode(StepMode::from_env()?);
    if let Some(frames) = frames {
        runner = runner.with_device_frames(frames);
    }
    Ok(runner)
}

/// `runner` with the run's EMA, where it keeps one.
fn with_ema<B: TrainingBackend>(runner: StepRunner<B>, ema: Option<Ema<B::InnerBackend>>) -> Result<StepRunner<B>> {
    match ema {
        Some(ema) => runner.with_ema(ema),
        None => Ok(runner),
    }
}
