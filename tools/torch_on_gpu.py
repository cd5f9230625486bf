"""What the PyTorch measurement tools share: torch and transformers on a CUDA
device, or the one line saying why not (their exit status is then 77, skipped)."""


def torch_on_gpu(what):
    """(torch, transformers), seeded, or None after printing why `what` is skipped."""
    try:
        import torch
        import transformers
    except ImportError as error:
        print(f"{what} skipped: {error}")
        return None
    if not torch.cuda.is_available():
        print(f"{what} skipped: torch sees no CUDA device")
        return None
    torch.manual_seed(0)
    return torch, transformers
