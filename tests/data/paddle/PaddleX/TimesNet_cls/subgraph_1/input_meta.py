class Program_weight_tensor_data_0:
    name = "data_0"
    shape = [11, 405, 3]
    dtype = "float32"
    min_val = float("-0.797899")
    max_val = float("12.5232")
    mean = float("7.45058e-09")
    std = float("1.0")
    data = None


class Program_weight_tensor_data_1:
    name = "data_1"
    shape = [1, 5000, 32]
    dtype = "float32"
    min_val = float("-1.0")
    max_val = float("1.0")
    mean = float("0.119002")
    std = float("0.697021")
    data = None
