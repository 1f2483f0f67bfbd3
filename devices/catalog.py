"""Real devices with sourced figures (shared/specs/devices_and_peers.md); every guess is marked "assumed".

Efficiency: vendors quote peak FLOP/s, and training reaches a small fraction of it. One value per device class:

- Phones, 0.04. On-device training frameworks (MNN, TFLite) train on the CPU, not on the GPU whose peak we
  quote. Benchmark-On-Device-Training measured MNN training AlexNet (61M parameters, so ImageNet's 224x224,
  about 1.42 GFLOP forward, 4.3 GFLOP to train an image) on a Meizu 16T's four big cores at 2269 ms for a
  batch of 16: 16 * 4.3 GFLOP / 2.269 s = 30 GFLOP/s, 4% of a flagship GPU's 0.72 TFLOP/s. No such
  measurement exists in our sources for cheaper phones; we assume the same fraction for every phone class.
- Jetson boards, 0.2 (assumed). CUDA training of small models at federated batch sizes is memory-bound on
  these boards (FLEdge, arXiv 2306.05172, finds them memory-bottlenecked); we take a fifth of the FP32 peak.
- Raspberry Pi 4, 0.25 (assumed). Its "peak" is already a measured HPL rate (no vendor FP32 figure), which
  dense, cache-blocked LINPACK reaches and CNN training does not; Python Linpack's 0.81 GFLOPS, a tenth of
  HPL, shows how far software can fall. We take a quarter: 2 GFLOP/s.
- fedlps_adreno630, 1.0: FedLPS's cost model divides FLOPs by the peak, and this profile reproduces it.
- server_a100, 0.4 (assumed): a data-centre GPU fed by HBM reaches a larger share of peak than the boards
  (FLEdge finds embedded boards about 4x slower than data-centre GPUs); it charges server-side work (FedDU's
  server steps, FedAP's pruning) on the same clock as the devices.

Links: phones are on cellular (Ookla, FedScale); boards are assumed to share a lab Wi-Fi. Latency is one-way
and assumed everywhere but for FedLPS (0: its cost model has none); no source in our notes measures it.
"""
from .profiles import DeviceProfile

GFLOPS = 1e9
TFLOPS = 1e12
MBIT_BPS = 1e6 / 8  # bytes/s in one megabit/s: operators and Ookla quote bits
MIB = 2**20  # FedLPS's code divides bytes by 2**20 and calls the result MB

PHONE_EFFICIENCY = 0.04
JETSON_EFFICIENCY = 0.2
RASPBERRY_PI_EFFICIENCY = 0.25
SERVER_EFFICIENCY = 0.4

# Assumed: no 4G uplink figure in our sources; Ookla's 5G medians put uplink at 21/166, about 1/8, of
# downlink, and 4G links are less lopsided, so we take 1/4.
LTE_UP_PER_DOWN = 1 / 4
# Assumed: boards share an 802.11ac access point in a lab, well below its link rate once shared.
LAB_WIFI_BPS = 100 * MBIT_BPS
LAB_WIFI_LATENCY_S = 0.010  # assumed: Wi-Fi hop plus a wired path to a nearby server
LTE_LOW_LATENCY_S = 0.050  # assumed: congested or weak-signal 4G, about 100 ms round trip
LTE_LATENCY_S = 0.025  # assumed: typical 4G, about 50 ms round trip
NR_LATENCY_S = 0.015  # assumed: 5G, about 30 ms round trip
DATACENTRE_NIC_BPS = 10_000 * MBIT_BPS  # assumed: a 10 Gbit/s server NIC
DATACENTRE_LATENCY_S = 0.001  # assumed: within one data centre

_PHONE_NOTE = (
    "peak is the GPU's; training runs on the CPU at 4% of it (MNN on a Meizu 16T, see module docstring; "
    "assumed alike for every phone class)"
)


def _on_lab_wifi(name: str, peak_flops: float, efficiency: float, source: str) -> DeviceProfile:
    """A board on the shared lab Wi-Fi: every board gets the same assumed link."""
    return DeviceProfile(
        name=name,
        peak_flops=peak_flops,
        efficiency=efficiency,
        up_Bps=LAB_WIFI_BPS,
        down_Bps=LAB_WIFI_BPS,
        latency_s=LAB_WIFI_LATENCY_S,
        source=f"{source}; link: lab Wi-Fi, 100 Mbit/s each way and 10 ms one-way (assumed)",
    )


CATALOG: dict[str, DeviceProfile] = {
    profile.name: profile
    for profile in (
        _on_lab_wifi(
            name="raspberry_pi_4",
            peak_flops=8 * GFLOPS,
            efficiency=RASPBERRY_PI_EFFICIENCY,
            source="4x Cortex-A72 1.5 GHz: about 8 GFLOPS FP64 on HPL (feiereisen.net, 2022), a measured rate "
            "used as peak for want of a vendor FP32 figure; Python Linpack 0.81 GFLOPS (sci-pi.org.uk); "
            "efficiency 0.25 assumed",
        ),
        _on_lab_wifi(
            name="jetson_nano",
            peak_flops=236 * GFLOPS,
            efficiency=JETSON_EFFICIENCY,
            source="128 Maxwell cores at 921 MHz: 236 GFLOPS FP32 (472 FP16), 5-10 W; "
            "efficiency 0.2 assumed (memory-bound, FLEdge)",
        ),
        _on_lab_wifi(
            name="jetson_tx2",
            peak_flops=750 * GFLOPS,
            efficiency=JETSON_EFFICIENCY,
            source="256 Pascal cores at 1.465 GHz: about 750 GFLOPS FP32 (1.5 TFLOPS FP16; NVIDIA quotes "
            "1.33 TFLOPS); efficiency 0.2 assumed (memory-bound, FLEdge)",
        ),
        _on_lab_wifi(
            name="jetson_xavier_nx",
            peak_flops=845 * GFLOPS,
            efficiency=JETSON_EFFICIENCY,
            source="384 Volta cores + 48 Tensor Cores: 845 GFLOPS FP32 (1.69 TFLOPS FP16, 21 TOPS INT8); "
            "efficiency 0.2 assumed (memory-bound, FLEdge)",
        ),
        DeviceProfile(
            name="phone_low",
            peak_flops=50 * GFLOPS,
            efficiency=PHONE_EFFICIENCY,
            up_Bps=6.1 * MBIT_BPS * LTE_UP_PER_DOWN,
            down_Bps=6.1 * MBIT_BPS,
            latency_s=LTE_LOW_LATENCY_S,
            source="GPU peak between PowerVR GE8320 (about 40 GFLOPS) and Adreno 506 (about 60 GFLOPS); "
            f"{_PHONE_NOTE}; downlink 6.1 Mbit/s, FedScale's median client (MobiPerf, unverified), uplink "
            "1/4 of it (assumed); latency 50 ms one-way (assumed)",
        ),
        DeviceProfile(
            name="phone_mid",
            peak_flops=190 * GFLOPS,
            efficiency=PHONE_EFFICIENCY,
            up_Bps=20.3 * MBIT_BPS * LTE_UP_PER_DOWN,
            down_Bps=20.3 * MBIT_BPS,
            latency_s=LTE_LATENCY_S,
            source="GPU peak assumed: geometric mean of phone_low (50 GFLOPS) and phone_high (0.72 TFLOPS), "
            f"no mid-range figure in our sources; {_PHONE_NOTE}; downlink 20.3 Mbit/s, Ookla's 2017 global "
            "mobile mean, uplink 1/4 of it (assumed); latency 25 ms one-way (assumed)",
        ),
        DeviceProfile(
            name="phone_high",
            peak_flops=0.72 * TFLOPS,
            efficiency=PHONE_EFFICIENCY,
            up_Bps=21 * MBIT_BPS,
            down_Bps=166 * MBIT_BPS,
            latency_s=NR_LATENCY_S,
            source="GPU peak between Adreno 650 (about 0.69 TFLOPS FP32) and Apple A14 (about 0.75 TFLOPS "
            f"FP32); {_PHONE_NOTE}; 5G, Ookla global median Q3 2021: 166 Mbit/s down, 21 Mbit/s up; "
            "latency 15 ms one-way (assumed)",
        ),
        DeviceProfile(
            name="fedlps_adreno630",
            peak_flops=727 * GFLOPS,
            efficiency=1.0,
            up_Bps=14.0 * MIB,
            down_Bps=110.6 * MIB,
            latency_s=0.0,
            source="FedLPS (Xue et al.) full-capability device: Adreno 630, 727 GFLOP/s (the code's capacity "
            "is 727*1024 MFLOP/s, 2.4% more; we keep the paper's figure); uplink 14.0 MB/s, downlink "
            "110.6 MB/s with MB = 2**20 bytes as its code divides by 2**20; efficiency 1.0 and latency 0 "
            "because its cost model divides FLOPs by the peak and has no latency term",
        ),
        DeviceProfile(
            name="server_a100",
            peak_flops=19.5 * TFLOPS,
            efficiency=SERVER_EFFICIENCY,
            up_Bps=DATACENTRE_NIC_BPS,
            down_Bps=DATACENTRE_NIC_BPS,
            latency_s=DATACENTRE_LATENCY_S,
            source="the server: NVIDIA A100, 19.5 TFLOPS FP32 (NVIDIA A100 datasheet; not from our device "
            "notes); efficiency 0.4 assumed; 10 Gbit/s NIC and 1 ms one-way (assumed)",
        ),
    )
}

# FedLPS's capability levels z_k (following HeteroFL): a device trains at z of its full compute.
FEDLPS_TIERS = (1.0, 1 / 2, 1 / 4, 1 / 8, 1 / 16)


def get_profile(name: str) -> DeviceProfile:
    try:
        return CATALOG[name]
    except KeyError:
        choices = ", ".join(sorted(CATALOG))
        raise KeyError(f"unknown device profile {name!r}; choose one of: {choices}") from None
