// Top level for co-simulation: hca_dma_engine with a skid buffer on every
// input stream and the configuration registered, so no logic runs
// combinationally from a top-level input. The model clocks this cycle by
// cycle from C++ (rtl/rtl_dma_core.cpp); its sinks always accept, so the
// output streams have no ready. Costs one cycle of latency per input stream.
`resetall
`timescale 1ns / 1ps
`default_nettype none

module hca_dma_engine_cosim #
(
    // Width of the data path in bits
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

    input  wire [BURST_WIDTH-1:0]       cfg_mrrs,
    input  wire [BURST_WIDTH-1:0]       cfg_mps,

    input  wire                         s_axis_desc_valid,
    output wire                         s_axis_desc_ready,
    input  wire [ADDR_WIDTH-1:0]        s_axis_desc_addr,
    input  wire [LEN_WIDTH-1:0]         s_axis_desc_len,
    input  wire                         s_axis_desc_write,
    input  wire [TAG_WIDTH-1:0]         s_axis_desc_tag,

    output wire                         m_axis_status_valid,
    output wire [TAG_WIDTH-1:0]         m_axis_status_tag,
    output wire [2:0]                   m_axis_status_error,

    output wire                         m_axis_rd_req_valid,
    output wire [ADDR_WIDTH-1:0]        m_axis_rd_req_addr,
    output wire [BURST_WIDTH-1:0]       m_axis_rd_req_len,
    output wire [OR_WIDTH-1:0]          m_axis_rd_req_tag,
    input  wire                         s_axis_rd_cpl_valid,
    output wire                         s_axis_rd_cpl_ready,
    input  wire [DATA_WIDTH-1:0]        s_axis_rd_cpl_data,

    output wire                         m_axis_rd_data_valid,
    output wire [DATA_WIDTH-1:0]        m_axis_rd_data_data,
    output wire [KEEP_WIDTH-1:0]        m_axis_rd_data_keep,
    output wire                         m_axis_rd_data_last,
    output wire [TAG_WIDTH-1:0]         m_axis_rd_data_id,

    input  wire                         s_axis_wr_data_valid,
    output wire                         s_axis_wr_data_ready,
    input  wire [DATA_WIDTH-1:0]        s_axis_wr_data_data,
    output wire                         wr_data_tag_valid,
    output wire [TAG_WIDTH-1:0]         wr_data_tag,

    output wire                         m_axis_wr_valid,
    output wire [ADDR_WIDTH-1:0]        m_axis_wr_addr,
    output wire [BURST_WIDTH-1:0]       m_axis_wr_len,
    output wire [DATA_WIDTH-1:0]        m_axis_wr_data,
    output wire [KEEP_WIDTH-1:0]        m_axis_wr_keep,
    output wire                         m_axis_wr_last,

    output wire                         busy,
    output wire                         quiet,
    output wire [OR_WIDTH:0]            stat_rd_inflight
);

localparam BURST_WIDTH = $clog2(MAX_BURST) + 1;
localparam OR_WIDTH = $clog2(OUTSTANDING_READS);
localparam DESC_WIDTH = ADDR_WIDTH + LEN_WIDTH + 1 + TAG_WIDTH;

reg [BURST_WIDTH-1:0] cfg_mrrs_reg = {BURST_WIDTH{1'b0}};
reg [BURST_WIDTH-1:0] cfg_mps_reg = {BURST_WIDTH{1'b0}};

always @(posedge clk) begin
    cfg_mrrs_reg <= cfg_mrrs;
    cfg_mps_reg <= cfg_mps;
end

wire                  desc_valid;
wire                  desc_ready;
wire [DESC_WIDTH-1:0] desc_data;
wire                  cpl_valid;
wire                  cpl_ready;
wire [DATA_WIDTH-1:0] cpl_data;
wire                  wr_valid;
wire                  wr_ready;
wire [DATA_WIDTH-1:0] wr_data;
wire                  engine_quiet;

// A beat in a skid buffer is work only if the engine can take it now: a
// descriptor waiting for a busy engine half changes nothing
assign quiet = engine_quiet && !(desc_valid && desc_ready) && !(cpl_valid && cpl_ready) && !(wr_valid && wr_ready);

axis_skid #(.WIDTH(DESC_WIDTH)) desc_skid (
    .clk(clk), .rst(rst),
    .s_valid(s_axis_desc_valid), .s_ready(s_axis_desc_ready),
    .s_data({s_axis_desc_addr, s_axis_desc_len, s_axis_desc_write, s_axis_desc_tag}),
    .m_valid(desc_valid), .m_ready(desc_ready), .m_data(desc_data)
);

axis_skid #(.WIDTH(DATA_WIDTH)) cpl_skid (
    .clk(clk), .rst(rst),
    .s_valid(s_axis_rd_cpl_valid), .s_ready(s_axis_rd_cpl_ready), .s_data(s_axis_rd_cpl_data),
    .m_valid(cpl_valid), .m_ready(cpl_ready), .m_data(cpl_data)
);

axis_skid #(.WIDTH(DATA_WIDTH)) wr_skid (
    .clk(clk), .rst(rst),
    .s_valid(s_axis_wr_data_valid), .s_ready(s_axis_wr_data_ready), .s_data(s_axis_wr_data_data),
    .m_valid(wr_valid), .m_ready(wr_ready), .m_data(wr_data)
);

hca_dma_engine #(
    .DATA_WIDTH(DATA_WIDTH),
    .KEEP_WIDTH(KEEP_WIDTH),
    .ADDR_WIDTH(ADDR_WIDTH),
    .LEN_WIDTH(LEN_WIDTH),
    .TAG_WIDTH(TAG_WIDTH),
    .OUTSTANDING_READS(OUTSTANDING_READS),
    .MAX_BURST(MAX_BURST),
    .MAX_LEN(MAX_LEN),
    .SLOTS(SLOTS)
)
engine_inst (
    .clk(clk),
    .rst(rst),
    .cfg_mrrs(cfg_mrrs_reg),
    .cfg_mps(cfg_mps_reg),
    .s_axis_desc_valid(desc_valid),
    .s_axis_desc_ready(desc_ready),
    .s_axis_desc_addr(desc_data[DESC_WIDTH-1 -: ADDR_WIDTH]),
    .s_axis_desc_len(desc_data[LEN_WIDTH+1+TAG_WIDTH-1 -: LEN_WIDTH]),
    .s_axis_desc_write(desc_data[TAG_WIDTH]),
    .s_axis_desc_tag(desc_data[TAG_WIDTH-1:0]),
    .m_axis_status_valid(m_axis_status_valid),
    .m_axis_status_ready(1'b1),
    .m_axis_status_tag(m_axis_status_tag),
    .m_axis_status_error(m_axis_status_error),
    .m_axis_rd_req_valid(m_axis_rd_req_valid),
    .m_axis_rd_req_ready(1'b1),
    .m_axis_rd_req_addr(m_axis_rd_req_addr),
    .m_axis_rd_req_len(m_axis_rd_req_len),
    .m_axis_rd_req_tag(m_axis_rd_req_tag),
    .s_axis_rd_cpl_valid(cpl_valid),
    .s_axis_rd_cpl_ready(cpl_ready),
    .s_axis_rd_cpl_data(cpl_data),
    .m_axis_rd_data_valid(m_axis_rd_data_valid),
    .m_axis_rd_data_ready(1'b1),
    .m_axis_rd_data_data(m_axis_rd_data_data),
    .m_axis_rd_data_keep(m_axis_rd_data_keep),
    .m_axis_rd_data_last(m_axis_rd_data_last),
    .m_axis_rd_data_id(m_axis_rd_data_id),
    .s_axis_wr_data_valid(wr_valid),
    .s_axis_wr_data_ready(wr_ready),
    .s_axis_wr_data_data(wr_data),
    .wr_data_tag_valid(wr_data_tag_valid),
    .wr_data_tag(wr_data_tag),
    .m_axis_wr_valid(m_axis_wr_valid),
    .m_axis_wr_ready(1'b1),
    .m_axis_wr_addr(m_axis_wr_addr),
    .m_axis_wr_len(m_axis_wr_len),
    .m_axis_wr_data(m_axis_wr_data),
    .m_axis_wr_keep(m_axis_wr_keep),
    .m_axis_wr_last(m_axis_wr_last),
    .busy(busy),
    .quiet(engine_quiet),
    .stat_rd_inflight(stat_rd_inflight)
);

endmodule

`resetall
