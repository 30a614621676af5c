//! Device names.

use serde::{Serialize, Serializer};
use std::fmt;

/// Where a graph runs. `Named` is for backends registered outside the core
/// (plugins, test doubles).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Device {
    Cpu,
    /// The best GPU available (WebGPU in a browser, else Vulkan/Metal/DX12).
    Gpu,
    WebGpu,
    Vulkan,
    OpenGl,
    Metal,
    DirectX,
    Cuda,
    Named(&'static str),
}

impl Device {
    /// The built-in devices, for listings.
    pub const BUILTIN: [Device; 8] = [
        Device::Cpu,
        Device::Gpu,
        Device::WebGpu,
        Device::Vulkan,
        Device::OpenGl,
        Device::Metal,
        Device::DirectX,
        Device::Cuda,
    ];

    pub fn name(&self) -> &'static str {
        match self {
            Device::Cpu => "cpu",
            Device::Gpu => "gpu",
            Device::WebGpu => "webgpu",
            Device::Vulkan => "vulkan",
            Device::OpenGl => "opengl",
            Device::Metal => "metal",
            Device::DirectX => "directx",
            Device::Cuda => "cuda",
            Device::Named(n) => n,
        }
    }

    /// Host memory is the device's own memory: no transfers needed.
    pub fn is_host(&self) -> bool {
        *self == Device::Cpu
    }

    /// Parse a device name: a built-in one, or a registered backend's.
    pub fn parse(s: &str) -> Result<Device, String> {
        let s = s.trim();
        let registered: Vec<Device> = crate::backend::backends()
            .iter()
            .map(|b| b.device())
            .collect();
        Device::BUILTIN
            .iter()
            .chain(&registered)
            .copied()
            .find(|d| d.name() == s)
            .ok_or_else(|| {
                let mut names: Vec<_> = Device::BUILTIN
                    .iter()
                    .chain(&registered)
                    .map(|d| d.name())
                    .collect();
                names.dedup();
                format!("unknown device `{s}` (known: {})", names.join(", "))
            })
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for Device {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}
