class Program_weight_tensor_data_0:
    name = "data_0"
    shape = [100, 1]
    dtype = "float32"
    min_val = float("0")
    max_val = float("0.5")
    data = None


class Program_weight_tensor_data_1:
    name = "data_1"
    shape = [100, 1]
    dtype = "float32"
    min_val = float("0")
    max_val = float("0.5")
    data = None


class Program_weight_tensor_data_2:
    name = "data_2"
    shape = [100, 1]
    dtype = "float32"
    min_val = float("0")
    max_val = float("0.5")
    data = None


class Program_weight_tensor_data_3:
    name = "data_3"
    shape = [100, 1]
    dtype = "float32"
    min_val = float("0")
    max_val = float("0.5")
    data = None
