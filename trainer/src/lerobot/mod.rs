//! Interchange with LeRobot and PyTorch: the model's tensors under LeRobot's state-dict names
//! (walked in one place, `names`, for both directions), [`export()`] to a folder LeRobot's
//! `from_pretrained` loads, [`load_lerobot_weights`] from LeRobot's `model.safetensors`, and
//! torchvision's ResNet-18 weights for the encoders ([`load_resnet18`]), by file or by
//! torchvision's name ([`backbone_weights_file`]); a LeRobot pretrained policy to start training
//! from ([`policy_from_pretrained`], `--policy.path`), and LeRobot's `train_config.json` read as
//! our configuration ([`from_lerobot_train_config`], `--config_path`).

mod export;
mod import;
mod names;
mod policy_path;
mod pretrained;
#[cfg(feature = "hub")]
mod share;
mod torch_hub;
mod train_config_json;

pub use export::{Entry, EntryValues, export, lerobot_config, lerobot_state_dict};
pub use import::{StateDict, load_lerobot_weights, read_state_dict};
pub use policy_path::{
    LEROBOT_POLICY_DIR, check_features, load_pretrained_policy, policy_from_pretrained, pretrained_policy_dir,
};
pub use pretrained::load_resnet18;
#[cfg(feature = "hub")]
pub use share::{ShareTarget, model_card, push_policy_to_hub};
pub use torch_hub::{TORCHVISION_MODELS_URL, TorchHub, backbone_weights_file, download_checked, hash_prefix};
pub use train_config_json::{FromLerobot, from_lerobot_train_config, is_lerobot_train_config};
