//! Interchange with LeRobot and PyTorch: the model's tensors under LeRobot's state-dict names
//! (walked in one place, `names`, for both directions), [`export()`] to a folder LeRobot's
//! `from_pretrained` loads, [`load_lerobot_weights`] from LeRobot's `model.safetensors`, and
//! torchvision's ResNet-18 weights for the encoders ([`load_resnet18`]), by file or by
//! torchvision's name ([`backbone_weights_file`]).

mod export;
mod import;
mod names;
mod pretrained;
mod torch_hub;

pub use export::{Entry, EntryValues, export, lerobot_config, lerobot_state_dict};
pub use import::{StateDict, load_lerobot_weights, read_state_dict};
pub use pretrained::load_resnet18;
pub use torch_hub::{TORCHVISION_MODELS_URL, TorchHub, backbone_weights_file, download_checked, hash_prefix};
