class Program_weight_tensor_data_0:
    name = "data_0"
    shape = [16, 96, 1]
    dtype = "float32"
    min_val = float("-2.06142")
    max_val = float("-0.30026")
    mean = float("-1.28192")
    std = float("0.34683")
    data = None
