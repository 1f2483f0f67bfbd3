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

Power and memory: every figure is the whole device's draw in watts (train_W, up_W, down_W, idle_W), so sending
and receiving are idle_W plus the radio.
- Boards: Raspberry Pi 4 from Pi Dramble's measurements (2.7 W idle, 6.4 W with stress --cpu 4); Jetsons from
  NVIDIA's power modes (Nano 5/10 W, TX2 7.5/15 W, Xavier NX 10/15 W): we charge training at the mode whose GPU
  clock the peak above assumes; their idle draw is assumed. No source measures the boards' Wi-Fi, so an
  802.11ac radio is assumed to add 1.0 W sending and 0.7 W receiving.
- Phones: the only sourced training-class load is Snapdragon 845, whose reference phone drew 2.93 W looping
  GFXBench Manhattan and 3.28 W in PUBG (Qualcomm demos reported by AnandTech and JagatReview, 2018); the other
  classes are scaled from it (assumed). Idle, screen off with a wakelock held, is assumed 0.5 W. LTE radio power
  follows Huang et al., "A Close Examination of Performance and Power Characteristics of 4G LTE Networks"
  (MobiSys 2012): 1288.04 mW + 438.39 mW per Mbit/s up + 51.97 mW per Mbit/s down, evaluated at each profile's
  own rates (for FedLPS's 117/928 Mbit/s, far outside the fit, at the paper's medians of 6 up and 13 down).
  5G NR draws 2-3x LTE's power (Xu et al., "Understanding Operational 5G", SIGCOMM 2020): phone_high's radio is
  2.5x LTE's 1.29 W active base in both directions; Huang's per-Mbit/s slopes, fitted at a few Mbit/s on a
  2012 phone, would give over 10 W at 5G rates (so phone_high sends at 21 Mbit/s for less than the LTE model
  charges phone_mid at 5 Mbit/s: a limit of the 2012 fit, not a claim that 5G draws less).
- Memory is RAM a training process may hold. Boards: total RAM (Pi 4 comes with 1/2/4/8 GB, we take 4 GB; the
  Jetson Nano's 4 GB is shared by CPU and GPU; TX2 and Xavier NX have 8 GB) less about 1-1.5 GB for Linux/L4T
  and the CUDA context (assumed; a public TX2 tegrastats log shows 977 of 7846 MB used running inference).
  Phones: Android's per-app Java heap (largeHeap: dalvik.vm.heapsize, 128-512 MB) does not bind native
  trainers such as MNN or TFLite, but the OS, system services and the user's apps keep most RAM and the
  low-memory killer ends a background process first; we assume a third of RAM (phone_low 3 GB, phone_mid
  6 GB, phone_high 8 GB, Snapdragon 845 6 GB: assumed typical RAM of each class). server_a100 is an A100 40 GB
  PCIe (250 W TDP; the SXM4 part is 400 W) and charges the GPU board only, not its host.
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
PHONE_LOW_DOWN_MBIT = 6.1  # FedScale's median client (MobiPerf, unverified)
PHONE_MID_DOWN_MBIT = 20.3  # Ookla's 2017 global mobile mean

GIB = 2**30  # RAM is sold in binary gigabytes

# Raspberry Pi 4 B, Pi Dramble power measurements (pidramble.com): idle 540 mA (2.7 W), stress --cpu 4 1280 mA.
PI4_IDLE_W = 2.7
PI4_LOAD_W = 6.4
PI4_RAM_BYTES = 4 * GIB  # the 4 GB variant (1/2/4/8 GB exist)
# Jetson power modes (NVIDIA): Nano 5 W / 10 W MaxN, TX2 7.5 W Max-Q / 15 W Max-N, Xavier NX 10 W / 15 W.
# Training is charged at the mode whose GPU clock the profile's peak assumes (Nano 921 MHz: MaxN; NX 1100 MHz: 15 W).
NANO_LOAD_W = 10.0
TX2_LOAD_W = 15.0
XAVIER_NX_LOAD_W = 15.0
NANO_IDLE_W = 2.0  # assumed: headless developer kit, CPU and GPU idle
TX2_IDLE_W = 3.0  # assumed: larger module (six cores, 8 GB) than the Nano
XAVIER_NX_IDLE_W = 3.5  # assumed: developer kit with its fan, six Carmel cores idle
NANO_RAM_BYTES = 4 * GIB  # LPDDR4 shared by CPU and GPU
TX2_RAM_BYTES = 8 * GIB  # Jetson TX2 datasheet: 8 GB LPDDR4 (tegrastats shows 7846 MB)
XAVIER_NX_RAM_BYTES = 8 * GIB  # Jetson Xavier NX datasheet: 8 GB LPDDR4x
# Assumed: Linux/L4T, the CUDA context and headroom keep this much (a TX2 running an inference app used 977 MB).
BOARD_OS_BYTES = 1 * GIB
JETSON_OS_BYTES = 1.5 * GIB
# Assumed: an 802.11ac radio (and the CPU feeding it) adds this to idle; no measurement in our sources.
BOARD_WIFI_TX_W = 1.0
BOARD_WIFI_RX_W = 0.7

# Snapdragon 845 reference phone, whole-phone power in Qualcomm's demos: GFXBench Manhattan loop 2933 mW
# (JagatReview, Feb 2018), PUBG 3276 mW (AnandTech, Dec 2018). The other phone classes scale from it (assumed).
SD845_LOAD_W = 2.93
PHONE_HIGH_LOAD_W = 3.5  # assumed: a newer flagship runs its bigger cores harder within a 3-4 W thermal budget
PHONE_MID_LOAD_W = 2.5  # assumed: fewer or slower big cores than the Snapdragon 845
PHONE_LOW_LOAD_W = 2.0  # assumed: eight little cores (Cortex-A53 class)
PHONE_IDLE_W = 0.5  # assumed: awake with a wakelock, screen off, radio camped, CPU mostly idle
# Huang et al., MobiSys 2012: LTE radio power = 1288.04 mW + 438.39 mW per Mbit/s up + 51.97 mW per Mbit/s down.
LTE_BASE_MW = 1288.04
LTE_UP_MW_PER_MBIT = 438.39
LTE_DOWN_MW_PER_MBIT = 51.97
LTE_MEDIAN_UP_MBIT = 6.0  # Huang et al.'s median LTE rates, 6 Mbit/s up and 13 down
LTE_MEDIAN_DOWN_MBIT = 13.0
NR_OVER_LTE = 2.5  # Xu et al., SIGCOMM 2020: 5G draws 2-3x the power of 4G; we take the middle
# Assumed typical RAM per class; a training process gets a third of it (see the module docstring).
PHONE_LOW_RAM_BYTES = 3 * GIB
PHONE_MID_RAM_BYTES = 6 * GIB
PHONE_HIGH_RAM_BYTES = 8 * GIB
SD845_RAM_BYTES = 6 * GIB  # Snapdragon 845 phones shipped with 4-8 GB
PHONE_TRAIN_SHARE = 1 / 3

# NVIDIA A100 40 GB PCIe product brief: 250 W TDP (the SXM4 part: 400 W), 40 GB HBM2.
A100_LOAD_W = 250.0
A100_IDLE_W = 50.0  # assumed: a GPU holding a CUDA context between server steps idles at tens of watts
DATACENTRE_NIC_W = 5.0  # assumed: a 10 Gbit/s NIC's draw, added to idle while sending or receiving
A100_MEMORY_BYTES = 38 * GIB  # assumed: 40 GB of HBM2 less about 2 GB for the CUDA context and allocator


def _lte_radio_W(up_mbit: float = 0.0, down_mbit: float = 0.0) -> float:
    """LTE radio power while transferring (Huang et al., MobiSys 2012), in watts."""
    return (LTE_BASE_MW + LTE_UP_MW_PER_MBIT * up_mbit + LTE_DOWN_MW_PER_MBIT * down_mbit) / 1000


NR_RADIO_W = NR_OVER_LTE * _lte_radio_W()  # 5G: 2.5x LTE's active base, not its per-Mbit/s slopes
PHONE_HIGH_RADIO_W = PHONE_IDLE_W + NR_RADIO_W
SD845_UP_W = PHONE_IDLE_W + _lte_radio_W(up_mbit=LTE_MEDIAN_UP_MBIT)
SD845_DOWN_W = PHONE_IDLE_W + _lte_radio_W(down_mbit=LTE_MEDIAN_DOWN_MBIT)

_PHONE_NOTE = (
    "peak is the GPU's; training runs on the CPU at 4% of it (MNN on a Meizu 16T, see module docstring; "
    "assumed alike for every phone class)"
)
_PHONE_IDLE_NOTE = f"{PHONE_IDLE_W} W idle (screen off, assumed)"
_PHONE_RAM_NOTE = "a third of it for training (assumed: OS, services and apps hold the rest; low-memory killer)"
_LTE_NOTE = "LTE radio power per Huang et al. (MobiSys 2012) at this link's rates, plus idle"


def _on_lab_wifi(
    name: str, peak_flops: float, efficiency: float, source: str, *, train_W: float, idle_W: float,
    memory_bytes: float,
) -> DeviceProfile:
    """A board on the shared lab Wi-Fi: every board gets the same assumed link and the same assumed radio power."""
    return DeviceProfile(
        name=name,
        peak_flops=peak_flops,
        efficiency=efficiency,
        up_Bps=LAB_WIFI_BPS,
        down_Bps=LAB_WIFI_BPS,
        latency_s=LAB_WIFI_LATENCY_S,
        source=f"{source}; link: lab Wi-Fi, 100 Mbit/s each way and 10 ms one-way (assumed); Wi-Fi power: idle "
        f"+ {BOARD_WIFI_TX_W} W sending, + {BOARD_WIFI_RX_W} W receiving (assumed: no measurement in our sources)",
        train_W=train_W,
        up_W=idle_W + BOARD_WIFI_TX_W,
        down_W=idle_W + BOARD_WIFI_RX_W,
        idle_W=idle_W,
        memory_bytes=memory_bytes,
    )


def _on_lte(
    name: str, peak_flops: float, down_mbit: float, latency_s: float, source: str, *, train_W: float,
    ram_bytes: float,
) -> DeviceProfile:
    """A phone on 4G: uplink LTE_UP_PER_DOWN of its downlink, LTE radio power at those rates plus idle, a third of
    its RAM for training; every LTE phone class shares these assumptions."""
    up_mbit = down_mbit * LTE_UP_PER_DOWN
    up_W, down_W = PHONE_IDLE_W + _lte_radio_W(up_mbit=up_mbit), PHONE_IDLE_W + _lte_radio_W(down_mbit=down_mbit)
    return DeviceProfile(
        name=name,
        peak_flops=peak_flops,
        efficiency=PHONE_EFFICIENCY,
        up_Bps=down_mbit * MBIT_BPS * LTE_UP_PER_DOWN,
        down_Bps=down_mbit * MBIT_BPS,
        latency_s=latency_s,
        source=f"{source}; power: {train_W} W training (assumed, below the Snapdragon 845's measured "
        f"{SD845_LOAD_W} W), {_PHONE_IDLE_NOTE}, {up_W:.2f} W sending and {down_W:.2f} W receiving "
        f"({_LTE_NOTE}); RAM: {ram_bytes / GIB:g} GB (assumed), {_PHONE_RAM_NOTE}",
        train_W=train_W,
        up_W=up_W,
        down_W=down_W,
        idle_W=PHONE_IDLE_W,
        memory_bytes=ram_bytes * PHONE_TRAIN_SHARE,
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
            f"efficiency 0.25 assumed; power: {PI4_LOAD_W} W training (stress --cpu 4), {PI4_IDLE_W} W idle "
            "(Pi Dramble power measurements); RAM: the 4 GB variant (1/2/4/8 GB exist), 3 GiB for training "
            "after about 1 GiB for the OS (assumed)",
            train_W=PI4_LOAD_W,
            idle_W=PI4_IDLE_W,
            memory_bytes=PI4_RAM_BYTES - BOARD_OS_BYTES,
        ),
        _on_lab_wifi(
            name="jetson_nano",
            peak_flops=236 * GFLOPS,
            efficiency=JETSON_EFFICIENCY,
            source="128 Maxwell cores at 921 MHz: 236 GFLOPS FP32 (472 FP16), 5-10 W; "
            f"efficiency 0.2 assumed (memory-bound, FLEdge); power: {NANO_LOAD_W:g} W training (NVIDIA's MaxN "
            f"mode, the one with the 921 MHz GPU clock; the other is 5 W), {NANO_IDLE_W} W idle (assumed); RAM: "
            "4 GB LPDDR4 shared by CPU and GPU, less about 1.5 GB for L4T and the CUDA context (assumed)",
            train_W=NANO_LOAD_W,
            idle_W=NANO_IDLE_W,
            memory_bytes=NANO_RAM_BYTES - JETSON_OS_BYTES,
        ),
        _on_lab_wifi(
            name="jetson_tx2",
            peak_flops=750 * GFLOPS,
            efficiency=JETSON_EFFICIENCY,
            source="256 Pascal cores at 1.465 GHz: about 750 GFLOPS FP32 (1.5 TFLOPS FP16; NVIDIA quotes "
            "1.33 TFLOPS); efficiency 0.2 assumed (memory-bound, FLEdge); power: "
            f"{TX2_LOAD_W:g} W training (NVIDIA's Max-N mode; Max-Q is 7.5 W; tegrastats read 7.4 W with six CPU "
            f"cores busy and the GPU idle in a public log), {TX2_IDLE_W} W idle (assumed); RAM: 8 GB LPDDR4 "
            "(TX2 datasheet), less about 1.5 GB for L4T and the CUDA context (assumed)",
            train_W=TX2_LOAD_W,
            idle_W=TX2_IDLE_W,
            memory_bytes=TX2_RAM_BYTES - JETSON_OS_BYTES,
        ),
        _on_lab_wifi(
            name="jetson_xavier_nx",
            peak_flops=845 * GFLOPS,
            efficiency=JETSON_EFFICIENCY,
            source="384 Volta cores + 48 Tensor Cores: 845 GFLOPS FP32 (1.69 TFLOPS FP16, 21 TOPS INT8); "
            f"efficiency 0.2 assumed (memory-bound, FLEdge); power: {XAVIER_NX_LOAD_W:g} W training (NVIDIA's "
            f"15 W mode, whose GPU runs at the 1100 MHz the peak assumes; the other is 10 W), {XAVIER_NX_IDLE_W} W "
            "idle (assumed); RAM: 8 GB LPDDR4x (Xavier NX datasheet), less about 1.5 GB for L4T and the CUDA "
            "context (assumed)",
            train_W=XAVIER_NX_LOAD_W,
            idle_W=XAVIER_NX_IDLE_W,
            memory_bytes=XAVIER_NX_RAM_BYTES - JETSON_OS_BYTES,
        ),
        _on_lte(
            name="phone_low",
            peak_flops=50 * GFLOPS,
            down_mbit=PHONE_LOW_DOWN_MBIT,
            latency_s=LTE_LOW_LATENCY_S,
            source="GPU peak between PowerVR GE8320 (about 40 GFLOPS) and Adreno 506 (about 60 GFLOPS); "
            f"{_PHONE_NOTE}; downlink 6.1 Mbit/s, FedScale's median client (MobiPerf, unverified), uplink "
            "1/4 of it (assumed); latency 50 ms one-way (assumed)",
            train_W=PHONE_LOW_LOAD_W,
            ram_bytes=PHONE_LOW_RAM_BYTES,
        ),
        _on_lte(
            name="phone_mid",
            peak_flops=190 * GFLOPS,
            down_mbit=PHONE_MID_DOWN_MBIT,
            latency_s=LTE_LATENCY_S,
            source="GPU peak assumed: geometric mean of phone_low (50 GFLOPS) and phone_high (0.72 TFLOPS), "
            f"no mid-range figure in our sources; {_PHONE_NOTE}; downlink 20.3 Mbit/s, Ookla's 2017 global "
            "mobile mean, uplink 1/4 of it (assumed); latency 25 ms one-way (assumed)",
            train_W=PHONE_MID_LOAD_W,
            ram_bytes=PHONE_MID_RAM_BYTES,
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
            f"latency 15 ms one-way (assumed); power: {PHONE_HIGH_LOAD_W} W training (assumed, above the "
            f"Snapdragon 845's measured {SD845_LOAD_W} W), {_PHONE_IDLE_NOTE}, {PHONE_HIGH_RADIO_W:.2f} W "
            "sending or receiving (5G NR at 2.5x LTE's 1.29 W active radio power: Xu et al., SIGCOMM 2020, "
            "measure 2-3x; plus idle); RAM: 8 GB (assumed; Snapdragon 865 phones ship 8-12 GB), "
            f"{_PHONE_RAM_NOTE}",
            train_W=PHONE_HIGH_LOAD_W,
            up_W=PHONE_HIGH_RADIO_W,
            down_W=PHONE_HIGH_RADIO_W,
            idle_W=PHONE_IDLE_W,
            memory_bytes=PHONE_HIGH_RAM_BYTES * PHONE_TRAIN_SHARE,
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
            "because its cost model divides FLOPs by the peak and has no latency term; power (FedLPS gives "
            f"none; a Snapdragon 845 phone's): {SD845_LOAD_W} W training (the 845 reference phone looping "
            f"GFXBench Manhattan, Qualcomm demo, JagatReview 2018), {_PHONE_IDLE_NOTE}, {SD845_UP_W:.2f} W "
            f"sending and {SD845_DOWN_W:.2f} W receiving (its LTE modem per Huang et al., MobiSys 2012, at that "
            "paper's median 6 Mbit/s up and 13 down, as 117/928 Mbit/s lie far outside the fit; plus idle); "
            f"RAM: 6 GB (assumed; 845 phones shipped 4-8 GB), {_PHONE_RAM_NOTE}",
            train_W=SD845_LOAD_W,
            up_W=SD845_UP_W,
            down_W=SD845_DOWN_W,
            idle_W=PHONE_IDLE_W,
            memory_bytes=SD845_RAM_BYTES * PHONE_TRAIN_SHARE,
        ),
        DeviceProfile(
            name="server_a100",
            peak_flops=19.5 * TFLOPS,
            efficiency=SERVER_EFFICIENCY,
            up_Bps=DATACENTRE_NIC_BPS,
            down_Bps=DATACENTRE_NIC_BPS,
            latency_s=DATACENTRE_LATENCY_S,
            source="the server: NVIDIA A100, 19.5 TFLOPS FP32 (NVIDIA A100 datasheet; not from our device "
            "notes); efficiency 0.4 assumed; 10 Gbit/s NIC and 1 ms one-way (assumed); power (the GPU board "
            f"only, not its host): {A100_LOAD_W:g} W training (A100 40 GB PCIe TDP, NVIDIA product brief; "
            f"SXM4 is 400 W), {A100_IDLE_W:g} W idle (assumed), idle + {DATACENTRE_NIC_W:g} W for the NIC "
            "sending or receiving (assumed); memory: 40 GB HBM2, 38 GiB for training after the CUDA context "
            "(assumed)",
            train_W=A100_LOAD_W,
            up_W=A100_IDLE_W + DATACENTRE_NIC_W,
            down_W=A100_IDLE_W + DATACENTRE_NIC_W,
            idle_W=A100_IDLE_W,
            memory_bytes=A100_MEMORY_BYTES,
        ),
    )
}

# The latency clock's roofline figures (compute: latency, testbed/latency/clock.py): memory bandwidth, the vendors'
# peak (bus width x transfer rate), and the per-call overhead of an eager PyTorch op, assumed from this machine's
# calibration (about 1-3 us an op on a 2.1 GHz Xeon core; benchmarks/RESULTS.md) scaled by the cores' speed.
GBPS = 1e9
_EDGE_CPU_CALL_S = 20e-6   # assumed: a 1.5 GHz Cortex-A72 runs Python and the dispatcher several times slower
_PHONE_CALL_S = 10e-6      # assumed: a phone's big cores, between a Pi's and a server's
_GPU_CALL_S = 10e-6        # assumed: a CUDA kernel launch (about 5 us) plus the eager dispatcher
ROOFLINE = {
    "raspberry_pi_4": (12.8 * GBPS, _EDGE_CPU_CALL_S, "LPDDR4-3200 on a 32-bit bus: 12.8 GB/s (BCM2711; peak)"),
    "jetson_nano": (25.6 * GBPS, _GPU_CALL_S, "64-bit LPDDR4 at 25.6 GB/s (Jetson Nano datasheet)"),
    "jetson_tx2": (59.7 * GBPS, _GPU_CALL_S, "128-bit LPDDR4 at 59.7 GB/s (Jetson TX2 datasheet)"),
    "jetson_xavier_nx": (51.2 * GBPS, _GPU_CALL_S, "128-bit LPDDR4x at 51.2 GB/s (Xavier NX datasheet)"),
    "phone_low": (7.5 * GBPS, _PHONE_CALL_S, "assumed: LPDDR3-933 on a 2x32-bit bus, 7.5 GB/s, a low-end SoC's"),
    "phone_mid": (14.9 * GBPS, _PHONE_CALL_S, "assumed: LPDDR4-1866 on a 2x16-bit bus, 14.9 GB/s"),
    "phone_high": (44 * GBPS, _PHONE_CALL_S, "LPDDR5-2750 on a 4x16-bit bus: 44 GB/s (Snapdragon 865)"),
    "fedlps_adreno630": (29.9 * GBPS, _PHONE_CALL_S, "LPDDR4x-1866 on a 4x16-bit bus: 29.9 GB/s (Snapdragon 845)"),
    "server_a100": (1555 * GBPS, _GPU_CALL_S, "HBM2 at 1,555 GB/s (A100 40 GB datasheet)"),
}
for _name, (_memory_Bps, _call_s, _where) in ROOFLINE.items():
    CATALOG[_name] = CATALOG[_name].with_overrides(
        memory_Bps=_memory_Bps, call_overhead_s=_call_s,
        source=f"{CATALOG[_name].source}; latency clock: memory {_where}, {_call_s * 1e6:g} us a call (assumed)")

# FedLPS's capability levels z_k (following HeteroFL): a device trains at z of its full compute.
FEDLPS_TIERS = (1.0, 1 / 2, 1 / 4, 1 / 8, 1 / 16)


def get_profile(name: str) -> DeviceProfile:
    try:
        return CATALOG[name]
    except KeyError:
        choices = ", ".join(sorted(CATALOG))
        raise KeyError(f"unknown device profile {name!r}; choose one of: {choices}") from None
