// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

/// @notice Reserves is a test contract whose views read like a Uniswap V2
/// pair's: getReserves() has three named outputs, quote() two unnamed ones.
contract Reserves {
    uint112 private stored0;
    uint112 private stored1;
    uint32 private updated;

    function set(uint112 r0, uint112 r1) external {
        stored0 = r0;
        stored1 = r1;
        updated = uint32(block.timestamp);
    }

    function getReserves() external view returns (uint112 reserve0, uint112 reserve1, uint32 blockTimestampLast) {
        return (stored0, stored1, updated);
    }

    function quote() external view returns (uint256, address) {
        return (uint256(stored0) * 2, address(this));
    }
}
