class Program_weight_tensor_parameter_0:
    name = "parameter_0"
    shape = [96]
    dtype = "float32"
    min_val = float("-0.096893")
    max_val = float("0.0889171")
    mean = float("0.000213582")
    std = float("0.0441362")
    data = None


class Program_weight_tensor_parameter_1:
    name = "parameter_1"
    shape = [96, 96]
    dtype = "float32"
    min_val = float("-0.115178")
    max_val = float("0.128102")
    mean = float("0.00947838")
    std = float("0.0583343")
    data = None


class Program_weight_tensor_parameter_2:
    name = "parameter_2"
    shape = [96]
    dtype = "float32"
    min_val = float("-0.105537")
    max_val = float("0.0845581")
    mean = float("-0.012385")
    std = float("0.0442325")
    data = None


class Program_weight_tensor_parameter_3:
    name = "parameter_3"
    shape = [96, 96]
    dtype = "float32"
    min_val = float("-0.125641")
    max_val = float("0.138936")
    mean = float("-0.000565255")
    std = float("0.0571832")
    data = None
