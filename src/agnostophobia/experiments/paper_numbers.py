"""The numbers the paper reports (Tables 1 and 2), for side-by-side comparison in
reports. Transcribed from the paper; ``None`` is the paper's "N/A"."""

#: Table 2's readouts, the FPRs of each tuple of :data:`TABLE2`, in order.
TABLE2_FPRS = ("1e-4", "1e-3", "1e-2", "1e-1")
# Table 2: CCR at FPR 1e-4, 1e-3, 1e-2, 1e-1.
TABLE2 = {
    "lenet++": {
        "devanagari": {
            "softmax": (0.0, 0.0, 0.0777, 0.9007),
            "background": (0.0, 0.4402, 0.7527, 0.9313),
            "entropic": (0.7142, 0.8746, 0.9580, 0.9788),
            "objectosphere": (0.7350, 0.9108, 0.9658, 0.9791),
        },
        "notmnist": {
            "softmax": (0.0, 0.3397, 0.4954, 0.8288),
            "background": (0.3806, 0.7179, 0.9068, 0.9624),
            "entropic": (0.4201, 0.8578, 0.9515, 0.9780),
            "objectosphere": (0.512, 0.8965, 0.9563, 0.9773),
        },
        "cifar10": {
            "softmax": (0.7684, 0.8617, 0.9288, 0.9641),
            "background": (0.8232, 0.9546, 0.9726, 0.973),
            "entropic": (0.973, 0.9787, 0.9804, 0.9806),
            "objectosphere": (0.9656, 0.9735, 0.9785, 0.9794),
        },
    },
    "cifar": {
        "svhn": {
            "softmax": (0.1924, 0.2949, 0.4599, 0.6473),
            "background": (0.2012, 0.3022, 0.4803, 0.6981),
            "entropic": (0.1071, 0.2338, 0.4277, 0.6214),
            "objectosphere": (0.1862, 0.3387, 0.5074, 0.6886),
            "objectosphere-scaled": (0.2547, 0.3896, 0.5454, 0.7013),
        },
        "cifar100": {
            "softmax": (None, 0.0706, 0.2339, 0.5139),
            "background": (None, 0.1598, 0.3429, 0.6049),
            "entropic": (None, 0.1776, 0.3501, 0.5855),
            "objectosphere": (None, 0.1866, 0.3595, 0.6345),
            "objectosphere-scaled": (None, 0.2584, 0.4334, 0.6647),
        },
    },
}

# Table 1 (LeNet++): entropy and deep-feature magnitude, mean and std, D_c and D_a.
TABLE1 = {
    "softmax": {"known": ((0.015, 0.084), (94.90, 27.47)), "unknown": ((0.318, 0.312), (32.27, 18.47))},
    "entropic": {"known": ((0.050, 0.159), (50.14, 17.36)), "unknown": ((1.984, 0.394), (1.50, 2.50))},
    "objectosphere": {"known": ((0.056, 0.168), (76.80, 28.55)), "unknown": ((2.031, 0.432), (2.19, 4.73))},
}

#: The protocols the paper's experiments ran on (Sec. 5: LeNet++ and CIFAR; Fig. 3: MNIST vs notMNIST);
#: a run on any other (a variant, a user's own images) is an evaluation, not a reproduction.
PAPER_PROTOCOLS = ("lenet++", "cifar", "mnist-notmnist")
# The unknown-set sizes the paper used.
PAPER_SIZES = {"devanagari": 10032, "notmnist": 18724, "cifar10": 10000, "svhn": 26032, "cifar100": 4500}
