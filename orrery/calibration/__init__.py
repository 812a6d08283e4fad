"""Stage 3: calibration. Measured sweeps (``measurements``) are reproduced by microbenchmarks on
the simulated machine (``validate``), fitted into machine parameters (``calibrate``), and whole
programs' timings fitted with the simulator in the loop (``appfit``)."""
