"""Stage 3: calibration. Measured files are read (``measurements``) and lined up with the
microbenchmark runs that reproduce them (``sweeps``: the catalogue, the units); the sweeps are
reproduced on the simulated machine (``validate``), fitted (``fit``), turned into machine
parameters (``derive``), the rest chosen with the simulator in the loop (``search``), reported
(``report``) and written as a calibration with its closed loop (``calibrate``), which ``merge``
reads back into a machine. Whole programs' timings are fitted with the simulator in the loop
(``appfit``)."""
