class Program_weight_tensor_parameter_0:
    name = "parameter_0"
    shape = [32, 3, 3]
    dtype = "float32"
    min_val = float("-1.19228")
    max_val = float("1.47394")
    mean = float("0.0485314")
    std = float("0.465735")
    data = None
