// HCA DMA engine: scatter/gather descriptors in, host-memory read and write
// requests out, payload to and from the packet buffer, one status per
// descriptor in descriptor order.
//
// A descriptor is checked when it is accepted; a bad one (zero length,
// longer than MAX_LEN, or running past the top of the address space) moves
// no data and completes with an error code, in order with the others. Good
// descriptors go to the read half (hca_dma_rd) or the write half
// (hca_dma_wr), which work concurrently. A ring of SLOTS completion slots
// puts the statuses back in descriptor order.
`resetall
`timescale 1ns / 1ps
`default_nettype none

module hca_dma_engine #
(
    // Width of the data path in bits (a multiple of 8, power of two bytes)
    parameter DATA_WIDTH = 512,
    // Byte lanes of the data path
    parameter KEEP_WIDTH = DATA_WIDTH/8,
    // Host address width
    parameter ADDR_WIDTH = 64,
    // Descriptor length field width
    parameter LEN_WIDTH = 32,
    // Descriptor tag width
    parameter TAG_WIDTH = 8,
    // Host read requests in flight at most (power of two)
    parameter OUTSTANDING_READS = 32,
    // Largest read request or write TLP in bytes (power of two, <= 4096)
    parameter MAX_BURST = 4096,
    // Longest descriptor in bytes; a longer one is an error
    parameter MAX_LEN = 16777216,
    // Descriptors accepted but not yet reported (power of two)
    parameter SLOTS = 16
)
(
    input  wire                         clk,
    input  wire                         rst,

    // Max read request size and max payload size in bytes (powers of two,
    // 128 .. MAX_BURST)
    input  wire [BURST_WIDTH-1:0]       cfg_mrrs,
    input  wire [BURST_WIDTH-1:0]       cfg_mps,

    // Descriptors: write = 1 moves packet buffer -> host memory
    input  wire                         s_axis_desc_valid,
    output wire                         s_axis_desc_ready,
    input  wire [ADDR_WIDTH-1:0]        s_axis_desc_addr,
    input  wire [LEN_WIDTH-1:0]         s_axis_desc_len,
    input  wire                         s_axis_desc_write,
    input  wire [TAG_WIDTH-1:0]         s_axis_desc_tag,

    // Per-descriptor status, in descriptor order
    output wire                         m_axis_status_valid,
    input  wire                         m_axis_status_ready,
    output wire [TAG_WIDTH-1:0]         m_axis_status_tag,
    output wire [2:0]                   m_axis_status_error,

    // Host read requests and their completions
    output wire                         m_axis_rd_req_valid,
    input  wire                         m_axis_rd_req_ready,
    output wire [ADDR_WIDTH-1:0]        m_axis_rd_req_addr,
    output wire [BURST_WIDTH-1:0]       m_axis_rd_req_len,
    output wire [OR_WIDTH-1:0]          m_axis_rd_req_tag,
    input  wire                         s_axis_rd_cpl_valid,
    output wire                         s_axis_rd_cpl_ready,
    input  wire [DATA_WIDTH-1:0]        s_axis_rd_cpl_data,

    // Read data to the packet buffer
    output wire                         m_axis_rd_data_valid,
    input  wire                         m_axis_rd_data_ready,
    output wire [DATA_WIDTH-1:0]        m_axis_rd_data_data,
    output wire [KEEP_WIDTH-1:0]        m_axis_rd_data_keep,
    output wire                         m_axis_rd_data_last,
    output wire [TAG_WIDTH-1:0]         m_axis_rd_data_id,

    // Write payload from the packet buffer: the descriptor named by
    // wr_data_tag while wr_data_tag_valid
    input  wire                         s_axis_wr_data_valid,
    output wire                         s_axis_wr_data_ready,
    input  wire [DATA_WIDTH-1:0]        s_axis_wr_data_data,
    output wire                         wr_data_tag_valid,
    output wire [TAG_WIDTH-1:0]         wr_data_tag,

    // Host posted-write TLP beats
    output wire                         m_axis_wr_valid,
    input  wire                         m_axis_wr_ready,
    output wire [ADDR_WIDTH-1:0]        m_axis_wr_addr,
    output wire [BURST_WIDTH-1:0]       m_axis_wr_len,
    output wire [DATA_WIDTH-1:0]        m_axis_wr_data,
    output wire [KEEP_WIDTH-1:0]        m_axis_wr_keep,
    output wire                         m_axis_wr_last,

    // Descriptors accepted and not yet reported, or a status pending
    output wire                         busy,
    // No state changes until an input arrives: the clock may stop
    output wire                         quiet,
    // Host read requests in flight
    output wire [OR_WIDTH:0]            stat_rd_inflight
);

localparam BURST_WIDTH = $clog2(MAX_BURST) + 1;
localparam OR_WIDTH = $clog2(OUTSTANDING_READS);
localparam SLOT_WIDTH = $clog2(SLOTS);

// Parameter checks, at elaboration
if (DATA_WIDTH < 16 || DATA_WIDTH > 1024 || (DATA_WIDTH & (DATA_WIDTH - 1)) != 0) begin : g_check_data_width
    // A beat has at least two byte lanes and is no wider than the smallest
    // request (128 B); the byte lanes are a power of two.
    $error("hca_dma_engine: DATA_WIDTH = %0d: must be a power of two from 16 to 1024 bits", DATA_WIDTH);
end
if (KEEP_WIDTH * 8 != DATA_WIDTH) begin : g_check_keep_width
    $error("hca_dma_engine: KEEP_WIDTH = %0d: must be DATA_WIDTH/8 = %0d", KEEP_WIDTH, DATA_WIDTH / 8);
end
if (MAX_BURST < 128 || MAX_BURST > 4096 || (MAX_BURST & (MAX_BURST - 1)) != 0) begin : g_check_max_burst
    $error("hca_dma_engine: MAX_BURST = %0d: must be a power of two from 128 to 4096 bytes", MAX_BURST);
end
if (OUTSTANDING_READS < 2 || (OUTSTANDING_READS & (OUTSTANDING_READS - 1)) != 0) begin : g_check_outstanding_reads
    $error("hca_dma_engine: OUTSTANDING_READS = %0d: must be a power of two, at least 2", OUTSTANDING_READS);
end
if (SLOTS < 2 || (SLOTS & (SLOTS - 1)) != 0) begin : g_check_slots
    $error("hca_dma_engine: SLOTS = %0d: must be a power of two, at least 2", SLOTS);
end
if (ADDR_WIDTH < 13 || ADDR_WIDTH > 64) begin : g_check_addr_width
    // Requests are cut at 4 KiB boundaries (address bit 12 and up).
    $error("hca_dma_engine: ADDR_WIDTH = %0d: must be 13 to 64 bits", ADDR_WIDTH);
end
if (LEN_WIDTH < BURST_WIDTH || LEN_WIDTH > ADDR_WIDTH) begin : g_check_len_width
    $error("hca_dma_engine: LEN_WIDTH = %0d: must be %0d (MAX_BURST's width) to ADDR_WIDTH = %0d bits", LEN_WIDTH, BURST_WIDTH,
           ADDR_WIDTH);
end
if (MAX_LEN < 1 || (LEN_WIDTH < 31 && MAX_LEN >= (1 << LEN_WIDTH))) begin : g_check_max_len
    $error("hca_dma_engine: MAX_LEN = %0d: must be 1 to 2^LEN_WIDTH - 1 bytes", MAX_LEN);
end
if (TAG_WIDTH < 1) begin : g_check_tag_width
    $error("hca_dma_engine: TAG_WIDTH = %0d: must be at least 1", TAG_WIDTH);
end

// Status codes, shared with the model (hca::DmaStatus)
localparam [2:0] ERR_NONE = 3'd0;
localparam [2:0] ERR_ZERO_LENGTH = 3'd1;
localparam [2:0] ERR_ADDRESS_WRAP = 3'd2;
localparam [2:0] ERR_TOO_LONG = 3'd3;

// Completion slots: a ring from head (oldest) to tail
reg [SLOT_WIDTH:0]      head_reg = {SLOT_WIDTH+1{1'b0}}, head_next;
reg [SLOT_WIDTH:0]      tail_reg = {SLOT_WIDTH+1{1'b0}}, tail_next;
reg [SLOTS-1:0]         slot_done_reg = {SLOTS{1'b0}}, slot_done_next;
reg [TAG_WIDTH-1:0]     slot_tag [0:SLOTS-1];
reg [2:0]               slot_err [0:SLOTS-1];
reg                     slot_we;

reg                     status_valid_reg = 1'b0, status_valid_next;
reg [TAG_WIDTH-1:0]     status_tag_reg = {TAG_WIDTH{1'b0}}, status_tag_next;
reg [2:0]               status_error_reg = 3'd0, status_error_next;

wire [SLOT_WIDTH:0] used = tail_reg - head_reg;
wire slots_full = used == SLOTS[SLOT_WIDTH:0];
wire slots_empty = used == {SLOT_WIDTH+1{1'b0}};
wire [SLOT_WIDTH-1:0] head = head_reg[SLOT_WIDTH-1:0];
wire [SLOT_WIDTH-1:0] tail = tail_reg[SLOT_WIDTH-1:0];

// Descriptor checks
wire [ADDR_WIDTH:0] desc_end = {1'b0, s_axis_desc_addr} + {{ADDR_WIDTH+1-LEN_WIDTH{1'b0}}, s_axis_desc_len} - 1'b1;
wire [2:0] desc_error = s_axis_desc_len == {LEN_WIDTH{1'b0}} ? ERR_ZERO_LENGTH :
                        s_axis_desc_len > MAX_LEN[LEN_WIDTH-1:0] ? ERR_TOO_LONG :
                        desc_end[ADDR_WIDTH] ? ERR_ADDRESS_WRAP : ERR_NONE;
wire desc_bad = desc_error != ERR_NONE;

wire rd_desc_ready;
wire wr_desc_ready;
wire rd_done_valid;
wire [SLOT_WIDTH-1:0] rd_done_slot;
wire wr_done_valid;
wire [SLOT_WIDTH-1:0] wr_done_slot;
wire rd_quiet;
wire wr_quiet;

wire engine_ready = s_axis_desc_write ? wr_desc_ready : rd_desc_ready;
assign s_axis_desc_ready = !slots_full && (desc_bad || engine_ready);
wire desc_fire = s_axis_desc_valid && s_axis_desc_ready;
wire rd_desc_valid = s_axis_desc_valid && !slots_full && !desc_bad && !s_axis_desc_write;
wire wr_desc_valid = s_axis_desc_valid && !slots_full && !desc_bad && s_axis_desc_write;

assign m_axis_status_valid = status_valid_reg;
assign m_axis_status_tag = status_tag_reg;
assign m_axis_status_error = status_error_reg;

wire head_done = !slots_empty && slot_done_reg[head];
assign busy = !slots_empty || status_valid_reg;
assign quiet = rd_quiet && wr_quiet && !status_valid_reg && !head_done;

always @* begin
    head_next = head_reg;
    tail_next = tail_reg;
    slot_done_next = slot_done_reg;
    slot_we = 1'b0;
    status_valid_next = status_valid_reg && !m_axis_status_ready;
    status_tag_next = status_tag_reg;
    status_error_next = status_error_reg;

    if (rd_done_valid) begin
        slot_done_next[rd_done_slot] = 1'b1;
    end
    if (wr_done_valid) begin
        slot_done_next[wr_done_slot] = 1'b1;
    end

    // Report the oldest descriptor once it is done
    if (head_done && (!status_valid_reg || m_axis_status_ready)) begin
        status_valid_next = 1'b1;
        status_tag_next = slot_tag[head];
        status_error_next = slot_err[head];
        slot_done_next[head] = 1'b0;
        head_next = head_reg + 1'b1;
    end

    if (desc_fire) begin
        slot_we = 1'b1;
        slot_done_next[tail] = desc_bad;
        tail_next = tail_reg + 1'b1;
    end
end

always @(posedge clk) begin
    head_reg <= head_next;
    tail_reg <= tail_next;
    slot_done_reg <= slot_done_next;
    status_valid_reg <= status_valid_next;
    status_tag_reg <= status_tag_next;
    status_error_reg <= status_error_next;

    if (slot_we) begin
        slot_tag[tail] <= s_axis_desc_tag;
        slot_err[tail] <= desc_error;
    end

    if (rst) begin
        head_reg <= {SLOT_WIDTH+1{1'b0}};
        tail_reg <= {SLOT_WIDTH+1{1'b0}};
        slot_done_reg <= {SLOTS{1'b0}};
        status_valid_reg <= 1'b0;
    end
end

hca_dma_rd #(
    .DATA_WIDTH(DATA_WIDTH),
    .KEEP_WIDTH(KEEP_WIDTH),
    .ADDR_WIDTH(ADDR_WIDTH),
    .LEN_WIDTH(LEN_WIDTH),
    .TAG_WIDTH(TAG_WIDTH),
    .SLOT_WIDTH(SLOT_WIDTH),
    .OUTSTANDING_READS(OUTSTANDING_READS),
    .MAX_BURST(MAX_BURST)
)
rd_inst (
    .clk(clk),
    .rst(rst),
    .cfg_mrrs(cfg_mrrs),
    .s_desc_valid(rd_desc_valid),
    .s_desc_ready(rd_desc_ready),
    .s_desc_addr(s_axis_desc_addr),
    .s_desc_len(s_axis_desc_len),
    .s_desc_tag(s_axis_desc_tag),
    .s_desc_slot(tail),
    .m_axis_req_valid(m_axis_rd_req_valid),
    .m_axis_req_ready(m_axis_rd_req_ready),
    .m_axis_req_addr(m_axis_rd_req_addr),
    .m_axis_req_len(m_axis_rd_req_len),
    .m_axis_req_tag(m_axis_rd_req_tag),
    .s_axis_cpl_valid(s_axis_rd_cpl_valid),
    .s_axis_cpl_ready(s_axis_rd_cpl_ready),
    .s_axis_cpl_data(s_axis_rd_cpl_data),
    .m_axis_data_valid(m_axis_rd_data_valid),
    .m_axis_data_ready(m_axis_rd_data_ready),
    .m_axis_data_data(m_axis_rd_data_data),
    .m_axis_data_keep(m_axis_rd_data_keep),
    .m_axis_data_last(m_axis_rd_data_last),
    .m_axis_data_id(m_axis_rd_data_id),
    .done_valid(rd_done_valid),
    .done_slot(rd_done_slot),
    .stat_inflight(stat_rd_inflight),
    .quiet(rd_quiet)
);

hca_dma_wr #(
    .DATA_WIDTH(DATA_WIDTH),
    .KEEP_WIDTH(KEEP_WIDTH),
    .ADDR_WIDTH(ADDR_WIDTH),
    .LEN_WIDTH(LEN_WIDTH),
    .TAG_WIDTH(TAG_WIDTH),
    .SLOT_WIDTH(SLOT_WIDTH),
    .MAX_BURST(MAX_BURST)
)
wr_inst (
    .clk(clk),
    .rst(rst),
    .cfg_mps(cfg_mps),
    .s_desc_valid(wr_desc_valid),
    .s_desc_ready(wr_desc_ready),
    .s_desc_addr(s_axis_desc_addr),
    .s_desc_len(s_axis_desc_len),
    .s_desc_tag(s_axis_desc_tag),
    .s_desc_slot(tail),
    .s_axis_data_valid(s_axis_wr_data_valid),
    .s_axis_data_ready(s_axis_wr_data_ready),
    .s_axis_data_data(s_axis_wr_data_data),
    .data_tag_valid(wr_data_tag_valid),
    .data_tag(wr_data_tag),
    .m_axis_wr_valid(m_axis_wr_valid),
    .m_axis_wr_ready(m_axis_wr_ready),
    .m_axis_wr_addr(m_axis_wr_addr),
    .m_axis_wr_len(m_axis_wr_len),
    .m_axis_wr_data(m_axis_wr_data),
    .m_axis_wr_keep(m_axis_wr_keep),
    .m_axis_wr_last(m_axis_wr_last),
    .done_valid(wr_done_valid),
    .done_slot(wr_done_slot),
    .quiet(wr_quiet)
);

endmodule

`resetall
