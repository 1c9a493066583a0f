"""The public names of ``course`` that had no door (no ``@arguments`` rules, no opening validation) when
tests/test_every_door.py was written (issue 49): debt, frozen.  Take a name off when it gains its rules; never
add one (declare the new function's rules instead)."""

UNVALIDATED = {
    "course.attention.plots": "memory_figure roofline_placement_figure roofline_points scan_tree_figure "
        "stepper_figure timing_figure traffic_figure",
    "course.attention.timing": "attention_flops attention_function counted_bytes",
    "course.backprop.bench": "TorchStep checkpoint_sweep compare_with_torch naive_train_step speed_ablation "
        "torch_mlp_step torch_sgd",
    "course.backprop.checkpointing": "CheckpointRun",
    "course.backprop.data": "Dataset",
    "course.backprop.gradcheck": "gradient_check rel_error",
    "course.backprop.layers": "mse_backward softmax_cross_entropy_backward",
    "course.backprop.plots": "ablation_figure checkpoint_figure ladder_figure "
        "ladder_timeline_figure mixed_precision_figure trace_figure training_figure",
    "course.backprop.step_kernels": "bias_relu_reference mask_bias_grad_reference mean_loss_reference "
        "ptxas_report sgd_flat_reference softmax_xent_reference",
    "course.backprop.timing": "TorchGraphStep captured_kernels float32_gemm_rate ladder_lines ladder_table "
        "ladder_widths_table step_counts step_ratio_lines step_time_sweep "
        "time_train_step torch_steps trace_from_results trace_to_results",
    "course.backprop.trace": "LayerTrace StepTrace trace_html",
    "course.backprop.train": "History accuracy",
    "course.backprop.widgets": "checkpoint_app footprint_app reference_note step_flops step_rate "
        "step_sweep_app step_time_app training_app",
    "course.bppsa.algorithm": "backprop_scan backprop_scan_elements bppsa_operator gradients_from_scan "
        "inplace_scan",
    "course.bppsa.fast": "rnn_hidden_gradients",
    "course.bppsa.plots": "memory_figure speedup_figure symbolic_scan timing_bars tree_figure",
    "course.bppsa.sparse": "conv2d conv2d_jacobian conv2d_jacobian_t csr_bytes jacobian_memory relu_jacobian_t "
        "tanh_jacobian_t to_device_sparse vgg11_first_conv_claim",
    "course.bppsa.timing": "crossover_n rnn_sweep speedup_grid speedups tf32_setting",
    "course.bppsa.widgets": "round_rate timing_app timing_cost_s timing_update tree_app",
    "course.kernels.plots": "draw_trace draw_warps scan_padding_report show",
    "course.kernels.tuning": "report_tuning",
    "course.kernels.warps": "scale_counts",
    "course.parallel.collectives": "AllreduceRun Message Step allreduce",
    "course.parallel.data_parallel": "apply_update average_gradients backward_with_hook data_parallel_train "
        "ddp_step flat_gradients single_process_gradients single_process_train",
    "course.parallel.nccl": "nccl_ring_check nccl_unavailable_reason ring_allreduce_nccl",
    "course.parallel.pipeline": "gpipe_step stage_layers",
    "course.parallel.plots": "allreduce_timing_figure data_parallel_figure model_figure pipeline_figure "
        "ring_step_figure tensor_parallel_bytes_figure tensor_parallel_figure zero_figure "
        "zero_model_figure",
    "course.parallel.ring_mpi": "ByteCounter halves_allreduce_mpi mpi_all_gather mpi_allreduce "
        "mpi_halves_allreduce mpi_reduce_scatter naive_allreduce_mpi "
        "ring_all_gather_mpi ring_allreduce_mpi ring_reduce_scatter_mpi",
    "course.parallel.tensor_parallel": "TensorParallelRun TensorShard gather_gradients rank_step run_rank_step",
    "course.parallel.timing": "fit_alpha_beta task_allreduce_timing task_dp_timing task_nccl_ring "
        "task_tp_timing task_zero_timing",
    "course.parallel.widgets": "model_app pipeline_app ring_app tensor_parallel_app zero_app",
    "course.plots": "add_footer bar_figure device_style figure_html figure_to_png footer_text live_device_text "
        "log2_x mark_noisy mark_point new_figure noisy_flags plain_tick_labels series_style "
        "source_tag speedup_axes sweep_figure",
    "course.recurrences.kernels": "diagonal_scan",
    "course.recurrences.plots": "chunk_figure first_bad_step loss_figure timing_figure work_figure",
    "course.recurrences.selective": "backward loss_and_grads mse_loss torch_gradients",
    "course.recurrences.task": "TrainingRun",
    "course.recurrences.timing": "chunked_kernel_rate crossover fastest_loop recurrence_function "
        "recurrence_input speedups time_recurrence",
    "course.recurrences.widgets": "closed_form_app timing_app work_app",
    "course.recurrences.work": "work_table",
    "course.results": "ResultSet git_commit gpu_environment load_reference provenance",
    "course.scan.algorithms": "Level ScanTrace blelloch_scan hillis_steele_scan prepare_scan sequential_scan",
    "course.scan.blocked": "scan_threads warm_up",
    "course.scan.lookback": "lookback_model",
    "course.scan.ops": "add affine affine_apply associative_on_samples identity_for interval matmul maximum",
    "course.scan.plots": "Frame blelloch_frames counts_figure hillis_steele_frames single_pass_figure "
        "timing_figure tree_figure",
    "course.scan.timing": "best_block_scans library_scan make_input scan_function scan_sweep "
        "single_pass_standing time_scan",
    "course.scan.widgets": "counts_app input_cost_s scan_cost_s scan_rate timing_app tree_app tree_input",
    "course.standin": "StandinArray kernel_twin register_kernel",
    "course.throughput.costs": "fusion_probe op_probe op_work point_flops point_probe sweep_sizes_within",
    "course.throughput.latency": "async_chain latency_summary launch_reading relabel_latency "
        "smallest_op_latency",
    "course.throughput.ops": "Crossover Op crossover crossover_size default_sizes find_crossover get_op "
        "throughput_sweep time_op",
    "course.throughput.plots": "async_figure batch_figure fusion_figure latency_figure memory_latency_figure "
        "precision_figure roofline_figure sweep_plot transfer_figure",
    "course.throughput.roofline": "compare_predictions measure_peaks measure_roofline peak_matmul_sizes "
        "peaks_of roof_shares roofline_point theoretical_peak",
    "course.throughput.widgets": "async_cost_s fusion_cost_s latency_app op_rate point_rate roofline_app "
        "sweep_app",
    "course.timing": "Timing noisy_note sweep_within_budget",
    "course.vectorize.plots": "bandwidth_figure bandwidth_sweep_figure flynn_figure ladder_figure "
        "lane_sweep_figure matmul_figure",
    "course.vectorize.widgets": "bandwidth_app ladder_app ladder_cost_s ladder_table lane_sweep lanes_app "
        "matmul_app matmul_plan matmul_rate",
    "course.widgets": "LiveApp clear_area control_panel cost_error device_buttons dtype_dropdown error_message "
        "estimate_s figure_words log2_slider measured_rate no_gpu_html noise_html progress "
        "size_slider",
}

#: Declared rules that let one of their kind's bad values through, or refuse it with no course error, when the walk
#: was written (``qual(argument)``): each is a lesson's own validator, in a module outside that change.
RULE_GAPS = """
course.bppsa.sparse.dense_bytes(shape)
course.bppsa.timing.rnn_timings(methods)
course.parallel.mpi.run_mpi(task)
course.vectorize.rungs.lanes_elementwise(op)
course.vectorize.rungs.threaded_elementwise(op)
course.scan.blocked.blocked_scan(x)
course.scan.blocked.sequential_cumsum(x)
"""
